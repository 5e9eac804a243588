// Package canon encodes Go values straight into RFC 8785 (JCS) canonical
// JSON, the form every journal line is written in, without encoding them
// first and canonicalising the text after.
//
// The contract: for every value v that encoding/json marshals, Marshal(v)
// returns exactly jcs.Transform(json.Marshal(v)), byte for byte, or the
// error either of them returns. So the bytes, and every hash over them,
// are those the journal had before this package existed; tests hold it to
// that (the RFC 8785 vectors, the journal's test vectors, and a property
// test over every journal data type against the two-step encoding).
//
// What it encodes directly: booleans, integers, floats (ECMAScript number
// formatting, as RFC 8785 requires), strings, structs with json tags
// (omitempty, omitzero, "-"), pointers, interfaces, slices, arrays, []byte
// (base64), maps with string or integer keys (members sorted by their
// UTF-16 code units), time.Time, json.RawMessage, json.Number and the
// json.Marshaler and encoding.TextMarshaler interfaces. A type it does not
// handle itself (a struct with embedded fields or a ",string" option, a map
// keyed by a TextMarshaler) is encoded the two-step way, so the result is
// the same, only slower.
//
// Strings are written as RFC 8785 writes them: UTF-8, with only '"', '\\'
// and control characters escaped (\b \t \n \f \r short, the others as
// \u00xx). Like encoding/json, invalid UTF-8 becomes U+FFFD. An integer
// beyond ±2^53 is written as the IEEE double nearest to it, as any RFC 8785
// implementation that reads the JSON text writes it.
package canon

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// ErrUnsupported wraps what cannot be JSON: NaN, infinities, channels,
// functions, a time outside years 0 to 9999, a cycle too deep.
var ErrUnsupported = errors.New("canon: value cannot be encoded")

// Marshal returns the RFC 8785 canonical JSON of v.
func Marshal(v any) ([]byte, error) { return Append(nil, v) }

// Append appends the RFC 8785 canonical JSON of v to dst.
func Append(dst []byte, v any) ([]byte, error) {
	if v == nil {
		return append(dst, "null"...), nil
	}
	rv := reflect.ValueOf(v)
	return encoderOf(rv.Type())(dst, rv, 0)
}

// AppendString appends s as an RFC 8785 string (quotes included).
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			dst = append(dst, s[start:i]...)
			dst = appendEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, "\ufffd"...)
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

func appendEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\f':
		return append(dst, '\\', 'f')
	case '\n':
		return append(dst, '\\', 'n')
	case '\r':
		return append(dst, '\\', 'r')
	case '\t':
		return append(dst, '\\', 't')
	}
	const hex = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
}

// AppendInt appends n as RFC 8785 writes the number n.
func AppendInt(dst []byte, n int64) []byte {
	if n > -maxSafe && n < maxSafe {
		return strconv.AppendInt(dst, n, 10)
	}
	b, _ := AppendFloat(dst, float64(n))
	return b
}

// AppendUint appends n as RFC 8785 writes the number n.
func AppendUint(dst []byte, n uint64) []byte {
	if n < maxSafe {
		return strconv.AppendUint(dst, n, 10)
	}
	b, _ := AppendFloat(dst, float64(n))
	return b
}

// maxSafe is 2^53: integers of smaller magnitude are exact as doubles and
// print as themselves.
const maxSafe = 1 << 53

// AppendFloat appends f in the ECMAScript form RFC 8785 requires.
func AppendFloat(dst []byte, f float64) ([]byte, error) {
	s, err := jcs.NumberToJSON(f)
	if err != nil {
		return dst, fmt.Errorf("%w: %v", ErrUnsupported, f)
	}
	return append(dst, s...), nil
}

// AppendTime appends t as encoding/json writes a time.Time (RFC 3339 with
// nanoseconds, quoted), which is already canonical.
func AppendTime(dst []byte, t time.Time) ([]byte, error) {
	if y := t.Year(); y < 0 || y > 9999 {
		return dst, fmt.Errorf("%w: time %v outside years 0 to 9999", ErrUnsupported, t)
	}
	dst = append(dst, '"')
	dst = t.AppendFormat(dst, time.RFC3339Nano)
	return append(dst, '"'), nil
}

// encoder appends the canonical form of v. depth guards against cycles
// through pointers, as encoding/json does.
type encoder func(dst []byte, v reflect.Value, depth int) ([]byte, error)

const maxDepth = 1000

var encoders sync.Map // reflect.Type -> encoder

func encoderOf(t reflect.Type) encoder {
	if e, ok := encoders.Load(t); ok {
		return e.(encoder)
	}
	// A recursive type refers to itself while its encoder is built: hand
	// out an indirection that waits for the real one.
	var (
		wg sync.WaitGroup
		f  encoder
	)
	wg.Add(1)
	fi, loaded := encoders.LoadOrStore(t, encoder(func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
		wg.Wait()
		return f(dst, v, depth)
	}))
	if loaded {
		return fi.(encoder)
	}
	f = newEncoder(t, true)
	wg.Done()
	encoders.Store(t, f)
	return f
}

var (
	marshalerType     = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
	timeType          = reflect.TypeFor[time.Time]()
	rawType           = reflect.TypeFor[json.RawMessage]()
	numberType        = reflect.TypeFor[json.Number]()
)

// newEncoder builds t's encoder. allowAddr: whether a pointer-receiver
// Marshaler may be used when the value is addressable (encoding/json's
// condAddrEncoder).
func newEncoder(t reflect.Type, allowAddr bool) encoder {
	switch t {
	case timeType:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) {
			return AppendTime(dst, v.Interface().(time.Time))
		}
	case rawType:
		return encodeRaw
	case numberType:
		return encodeNumber
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(marshalerType) && !t.Implements(marshalerType) {
		return condAddr(addrMarshal, newEncoder(t, false))
	}
	if t.Implements(marshalerType) {
		return marshalerEncoder
	}
	if t.Kind() != reflect.Pointer && allowAddr && reflect.PointerTo(t).Implements(textMarshalerType) && !t.Implements(textMarshalerType) {
		return condAddr(addrText, newEncoder(t, false))
	}
	if t.Implements(textMarshalerType) {
		return textEncoder
	}
	switch t.Kind() {
	case reflect.Bool:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) {
			return strconv.AppendBool(dst, v.Bool()), nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) { return AppendInt(dst, v.Int()), nil }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) { return AppendUint(dst, v.Uint()), nil }
	case reflect.Float32:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) {
			// encoding/json writes a float32 with 32-bit precision; the
			// canonicaliser reads that text back as a double.
			f, _ := strconv.ParseFloat(strconv.FormatFloat(v.Float(), 'g', -1, 32), 64)
			return AppendFloat(dst, f)
		}
	case reflect.Float64:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) { return AppendFloat(dst, v.Float()) }
	case reflect.String:
		return func(dst []byte, v reflect.Value, _ int) ([]byte, error) { return AppendString(dst, v.String()), nil }
	case reflect.Interface:
		return func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			e := v.Elem()
			return encoderOf(e.Type())(dst, e, depth)
		}
	case reflect.Pointer:
		elem := t.Elem()
		return func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			if depth++; depth > maxDepth {
				return dst, fmt.Errorf("%w: nested deeper than %d", ErrUnsupported, maxDepth)
			}
			return encoderOf(elem)(dst, v.Elem(), depth)
		}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(marshalerType) && !reflect.PointerTo(t.Elem()).Implements(textMarshalerType) {
			return encodeBytes
		}
		elem := t.Elem()
		return func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
			if v.IsNil() {
				return append(dst, "null"...), nil
			}
			return encodeArray(dst, v, elem, depth)
		}
	case reflect.Array:
		elem := t.Elem()
		return func(dst []byte, v reflect.Value, depth int) ([]byte, error) { return encodeArray(dst, v, elem, depth) }
	case reflect.Map:
		return newMapEncoder(t)
	case reflect.Struct:
		return newStructEncoder(t)
	}
	return twoStep
}

func condAddr(withAddr, without encoder) encoder {
	return func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
		if v.CanAddr() {
			return withAddr(dst, v, depth)
		}
		return without(dst, v, depth)
	}
}

func addrMarshal(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	return marshalerEncoder(dst, v.Addr(), depth)
}

func addrText(dst []byte, v reflect.Value, depth int) ([]byte, error) {
	return textEncoder(dst, v.Addr(), depth)
}

func marshalerEncoder(dst []byte, v reflect.Value, _ int) ([]byte, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return append(dst, "null"...), nil
	}
	m, ok := v.Interface().(json.Marshaler)
	if !ok {
		return append(dst, "null"...), nil
	}
	b, err := m.MarshalJSON()
	if err != nil {
		return dst, fmt.Errorf("canon: %s.MarshalJSON: %w", v.Type(), err)
	}
	return appendCanonicalText(dst, b)
}

func textEncoder(dst []byte, v reflect.Value, _ int) ([]byte, error) {
	if v.Kind() == reflect.Pointer && v.IsNil() {
		return append(dst, "null"...), nil
	}
	m, ok := v.Interface().(encoding.TextMarshaler)
	if !ok {
		return append(dst, "null"...), nil
	}
	b, err := m.MarshalText()
	if err != nil {
		return dst, fmt.Errorf("canon: %s.MarshalText: %w", v.Type(), err)
	}
	return AppendString(dst, string(b)), nil
}

func encodeRaw(dst []byte, v reflect.Value, _ int) ([]byte, error) {
	b := v.Bytes()
	if len(b) == 0 {
		// encoding/json writes an empty RawMessage as null.
		return append(dst, "null"...), nil
	}
	return appendCanonicalText(dst, b)
}

func encodeNumber(dst []byte, v reflect.Value, _ int) ([]byte, error) {
	s := v.String()
	if s == "" {
		s = "0"
	}
	return appendCanonicalText(dst, []byte(s))
}

// appendCanonicalText appends JSON text b in canonical form: as it is when
// it already is (the common case: a time, a number, text this package
// wrote), else through the canonicaliser.
func appendCanonicalText(dst, b []byte) ([]byte, error) {
	if IsCanonical(b) {
		return append(dst, b...), nil
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return dst, fmt.Errorf("canon: %w", err)
	}
	return append(dst, c...), nil
}

func encodeBytes(dst []byte, v reflect.Value, _ int) ([]byte, error) {
	if v.IsNil() {
		return append(dst, "null"...), nil
	}
	b := v.Bytes()
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"'), nil
}

func encodeArray(dst []byte, v reflect.Value, elem reflect.Type, depth int) ([]byte, error) {
	if depth++; depth > maxDepth {
		return dst, fmt.Errorf("%w: nested deeper than %d", ErrUnsupported, maxDepth)
	}
	enc := encoderOf(elem)
	dst = append(dst, '[')
	var err error
	for i := range v.Len() {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = enc(dst, v.Index(i), depth); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// twoStep encodes what this package does not handle itself the way the
// contract defines: encoding/json, then the canonicaliser.
func twoStep(dst []byte, v reflect.Value, _ int) ([]byte, error) {
	b, err := json.Marshal(v.Interface())
	if err != nil {
		return dst, err
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return dst, fmt.Errorf("canon: %w", err)
	}
	return append(dst, c...), nil
}

// lessUTF16 orders member names as RFC 8785 does: by their UTF-16 code
// units.
func lessUTF16(a, b string) int {
	if isASCII(a) && isASCII(b) {
		return strings.Compare(a, b)
	}
	ua, ub := utf16.Encode([]rune(a)), utf16.Encode([]rune(b))
	return slices.Compare(ua, ub)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func newMapEncoder(t reflect.Type) encoder {
	kt := t.Key()
	var keyString func(reflect.Value) string
	switch kt.Kind() {
	case reflect.String: // a string key is itself, TextMarshaler or not (encoding/json's rule)
		keyString = func(k reflect.Value) string { return k.String() }
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		if kt.Implements(textMarshalerType) {
			return twoStep
		}
		keyString = func(k reflect.Value) string { return strconv.FormatInt(k.Int(), 10) }
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		if kt.Implements(textMarshalerType) {
			return twoStep
		}
		keyString = func(k reflect.Value) string { return strconv.FormatUint(k.Uint(), 10) }
	default:
		return twoStep
	}
	elem := encoderOf(t.Elem())
	type kv struct {
		k string
		v reflect.Value
	}
	return func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
		if v.IsNil() {
			return append(dst, "null"...), nil
		}
		if depth++; depth > maxDepth {
			return dst, fmt.Errorf("%w: nested deeper than %d", ErrUnsupported, maxDepth)
		}
		kvs := make([]kv, 0, v.Len())
		for it := v.MapRange(); it.Next(); {
			kvs = append(kvs, kv{keyString(it.Key()), it.Value()})
		}
		slices.SortFunc(kvs, func(a, b kv) int { return lessUTF16(a.k, b.k) })
		dst = append(dst, '{')
		var err error
		for i, m := range kvs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendString(dst, m.k)
			dst = append(dst, ':')
			if dst, err = elem(dst, m.v, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
}

// field is one member a struct encodes.
type field struct {
	name      string
	key       []byte // the quoted name and ':'
	index     int
	omitEmpty bool
	omitZero  func(reflect.Value) bool
	enc       encoder
}

func newStructEncoder(t reflect.Type) encoder {
	var fields []field
	for i := range t.NumField() {
		sf := t.Field(i)
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		if sf.Anonymous {
			// Embedded fields follow encoding/json's promotion rules;
			// leave those to it rather than copy them.
			return twoStep
		}
		if !sf.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if !validTagName(name) {
			name = ""
		}
		if name == "" {
			name = sf.Name
		}
		f := field{name: name, index: i}
		for opt := range strings.SplitSeq(opts, ",") {
			switch opt {
			case "omitempty":
				f.omitEmpty = true
			case "omitzero":
				f.omitZero = zeroFunc(sf.Type)
			case "string":
				return twoStep // quoted scalars: rare, and encoding/json's rules
			}
		}
		f.key = append(AppendString(nil, name), ':')
		fields = append(fields, f)
	}
	slices.SortStableFunc(fields, func(a, b field) int { return lessUTF16(a.name, b.name) })
	for i := 1; i < len(fields); i++ {
		if fields[i].name == fields[i-1].name {
			return twoStep // duplicate names: encoding/json drops both
		}
	}
	for i := range fields {
		fields[i].enc = encoderOf(t.Field(fields[i].index).Type)
	}
	return func(dst []byte, v reflect.Value, depth int) ([]byte, error) {
		dst = append(dst, '{')
		first := true
		var err error
		for i := range fields {
			f := &fields[i]
			fv := v.Field(f.index)
			if f.omitEmpty && isEmpty(fv) || f.omitZero != nil && f.omitZero(fv) {
				continue
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = append(dst, f.key...)
			if dst, err = f.enc(dst, fv, depth); err != nil {
				return dst, err
			}
		}
		return append(dst, '}'), nil
	}
}

// validTagName is encoding/json's rule for a usable tag name.
func validTagName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}

var isZeroerType = reflect.TypeFor[interface{ IsZero() bool }]()

// zeroFunc is encoding/json's omitzero test for t.
func zeroFunc(t reflect.Type) func(reflect.Value) bool {
	switch {
	case t.Kind() == reflect.Interface && t.Implements(isZeroerType):
		return func(v reflect.Value) bool {
			return v.IsNil() || v.Elem().Kind() == reflect.Pointer && v.Elem().IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero()
		}
	case t.Kind() == reflect.Pointer && t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.IsNil() || v.Interface().(interface{ IsZero() bool }).IsZero() }
	case t.Implements(isZeroerType):
		return func(v reflect.Value) bool { return v.Interface().(interface{ IsZero() bool }).IsZero() }
	case reflect.PointerTo(t).Implements(isZeroerType):
		return func(v reflect.Value) bool {
			if !v.CanAddr() {
				c := reflect.New(v.Type()).Elem()
				c.Set(v)
				v = c
			}
			return v.Addr().Interface().(interface{ IsZero() bool }).IsZero()
		}
	}
	return reflect.Value.IsZero
}

// isEmpty is encoding/json's omitempty test.
func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool:
		return !v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int() == 0
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return v.Uint() == 0
	case reflect.Float32, reflect.Float64:
		return v.Float() == 0
	case reflect.Interface, reflect.Pointer:
		return v.IsNil()
	}
	return false
}
