package strictjson_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/gatehouse/gatehouse/grounding/strictjson"
)

// BenchmarkScan reads a provider call's params (a payment) and a 64 KiB
// work input, with and without case folding, next to json.Valid alone on
// the same bytes in the same run (the floor: Scan runs it first).
func BenchmarkScan(b *testing.B) {
	params := []byte(`{"provider":"erp","method":"POST","path":"/payments","atom":"erp.pay","body":{"invoice":"INV-7","iban":"NL91ABNA0417164300","amount":"1200.00","remittance_email":"ap@acme.example","Lines":[{"Sku":"A-1","qty":2},{"Sku":"B-2","qty":1}]}}`)
	var sb strings.Builder
	sb.WriteString(`{"invoice":"INV-7","lines":[`)
	for i := 0; sb.Len() < 64<<10; i++ {
		if i > 0 {
			sb.WriteString(",")
		}
		sb.WriteString(`{"sku":"S-` + strconv.Itoa(i) + `","Qty":1,"Note":"line ` + strconv.Itoa(i) + `"}`)
	}
	sb.WriteString("]}")
	input := []byte(sb.String())
	for _, doc := range []struct {
		name string
		data []byte
	}{{"params", params}, {"input-64KiB", input}} {
		b.Run(doc.name+"/json.Valid", func(b *testing.B) {
			b.SetBytes(int64(len(doc.data)))
			for b.Loop() {
				if !json.Valid(doc.data) {
					b.Fatal("invalid")
				}
			}
		})
		for _, fold := range []bool{false, true} {
			b.Run(doc.name+"/scan-fold="+strconv.FormatBool(fold), func(b *testing.B) {
				b.SetBytes(int64(len(doc.data)))
				b.ReportAllocs()
				for b.Loop() {
					if dups, err := strictjson.Scan(doc.data, strictjson.Options{Fold: fold}); err != nil || len(dups) != 0 {
						b.Fatal(err, dups)
					}
				}
			})
		}
	}
}
