package main

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"unicode"
)

// printJSON writes v to env.stdout as one line of JSON, the form every
// --json of the CLI prints: one object per line (so `jq` and line readers
// take it), fields in snake_case.
//
// Many reports are types of other packages whose fields carry no json tag
// (their wire or storage form keeps Go's field names, and changing it would
// break what is stored); at this edge such a field is named in snake_case
// (ActionDigest is "action_digest"). Everything else is encoding/json's:
// tags, omitempty and omitzero, embedded structs, json.Marshaler and
// encoding.TextMarshaler values (time.Time, json.RawMessage) as they encode
// themselves, map keys as they are (they are data, not field names).
func printJSON(env *cliEnv, v any) error {
	return writeJSON(env.stdout, v)
}

func writeJSON(w io.Writer, v any) error {
	var buf bytes.Buffer
	if err := encodeSnake(&buf, reflect.ValueOf(v)); err != nil {
		return err
	}
	buf.WriteByte('\n')
	_, err := w.Write(buf.Bytes())
	return err
}

var (
	jsonMarshalerType = reflect.TypeFor[json.Marshaler]()
	textMarshalerType = reflect.TypeFor[encoding.TextMarshaler]()
)

func encodeSnake(buf *bytes.Buffer, v reflect.Value) error {
	if !v.IsValid() {
		buf.WriteString("null")
		return nil
	}
	if m, ok := marshaler(v); ok {
		return marshalWith(buf, m)
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		return encodeSnake(buf, v.Elem())
	case reflect.Struct:
		return encodeStruct(buf, v)
	case reflect.Map:
		return encodeMap(buf, v)
	case reflect.Slice:
		if v.IsNil() {
			buf.WriteString("null")
			return nil
		}
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return marshalWith(buf, v.Interface()) // base64, as encoding/json
		}
		fallthrough
	case reflect.Array:
		buf.WriteByte('[')
		for i := range v.Len() {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := encodeSnake(buf, v.Index(i)); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
		return nil
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return fmt.Errorf("json: unsupported type %s", v.Type())
	}
	return marshalWith(buf, v.Interface()) // scalars, formatted exactly as encoding/json does
}

// marshaler is v as a value that encodes itself, if it is one.
func marshaler(v reflect.Value) (any, bool) {
	t := v.Type()
	if t.Kind() == reflect.Pointer && v.IsNil() {
		return nil, false
	}
	if t.Implements(jsonMarshalerType) || t.Implements(textMarshalerType) {
		return v.Interface(), true
	}
	// Pointer methods only where encoding/json calls them: on an
	// addressable value.
	if t.Kind() != reflect.Pointer && v.CanAddr() &&
		(reflect.PointerTo(t).Implements(jsonMarshalerType) || reflect.PointerTo(t).Implements(textMarshalerType)) {
		return v.Addr().Interface(), true
	}
	return nil, false
}

func marshalWith(buf *bytes.Buffer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	buf.Write(b)
	return nil
}

// jsonField is one struct field as encoding/json would write it.
type jsonField struct {
	name      string
	index     []int
	omitEmpty bool
	omitZero  bool
	quoted    bool // the ",string" option
}

// fieldsOf lists t's fields in encoding/json's order, with embedded
// structs' fields promoted and names snake_cased where no tag names them.
func fieldsOf(t reflect.Type) []jsonField {
	var out []jsonField
	seen := map[string]int{} // name -> depth of the field holding it
	var walk func(t reflect.Type, index []int, depth int)
	walk = func(t reflect.Type, index []int, depth int) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			idx := append(slices.Clone(index), i)
			if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
				walk(ft, idx, depth+1)
				continue
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = snakeCase(f.Name)
			}
			if d, ok := seen[name]; ok && d <= depth {
				continue // a shallower field of the same name wins, as in encoding/json
			}
			seen[name] = depth
			out = slices.DeleteFunc(out, func(x jsonField) bool { return x.name == name })
			out = append(out, jsonField{name: name, index: idx,
				omitEmpty: hasOpt(opts, "omitempty"), omitZero: hasOpt(opts, "omitzero"), quoted: hasOpt(opts, "string")})
		}
	}
	walk(t, nil, 0)
	return out
}

func hasOpt(opts, want string) bool {
	for o := range strings.SplitSeq(opts, ",") {
		if o == want {
			return true
		}
	}
	return false
}

func encodeStruct(buf *bytes.Buffer, v reflect.Value) error {
	buf.WriteByte('{')
	first := true
	for _, f := range fieldsOf(v.Type()) {
		fv, ok := fieldByIndex(v, f.index)
		if !ok {
			continue // inside a nil embedded pointer
		}
		if f.omitEmpty && isEmpty(fv) || f.omitZero && isZero(fv) {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		if err := marshalWith(buf, f.name); err != nil {
			return err
		}
		buf.WriteByte(':')
		if f.quoted && fv.Kind() != reflect.Struct {
			b, err := json.Marshal(fv.Interface())
			if err != nil {
				return err
			}
			if err := marshalWith(buf, string(b)); err != nil {
				return err
			}
			continue
		}
		if err := encodeSnake(buf, fv); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

func fieldByIndex(v reflect.Value, index []int) (reflect.Value, bool) {
	for i, x := range index {
		if i > 0 && v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		v = v.Field(x)
	}
	return v, true
}

func isEmpty(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Array, reflect.Map, reflect.Slice, reflect.String:
		return v.Len() == 0
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Interface, reflect.Pointer:
		return v.IsZero()
	}
	return false
}

func isZero(v reflect.Value) bool {
	if z, ok := v.Interface().(interface{ IsZero() bool }); ok {
		if v.Kind() == reflect.Pointer && v.IsNil() {
			return true
		}
		return z.IsZero()
	}
	return v.IsZero()
}

func encodeMap(buf *bytes.Buffer, v reflect.Value) error {
	if v.IsNil() {
		buf.WriteString("null")
		return nil
	}
	type kv struct {
		k string
		v reflect.Value
	}
	var kvs []kv
	for it := v.MapRange(); it.Next(); {
		k, err := mapKey(it.Key())
		if err != nil {
			return err
		}
		kvs = append(kvs, kv{k, it.Value()})
	}
	slices.SortFunc(kvs, func(a, b kv) int { return strings.Compare(a.k, b.k) })
	buf.WriteByte('{')
	for i, e := range kvs {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := marshalWith(buf, e.k); err != nil {
			return err
		}
		buf.WriteByte(':')
		if err := encodeSnake(buf, e.v); err != nil {
			return err
		}
	}
	buf.WriteByte('}')
	return nil
}

// mapKey is a map key as encoding/json writes it.
func mapKey(k reflect.Value) (string, error) {
	if k.Kind() == reflect.String {
		return k.String(), nil
	}
	if tm, ok := k.Interface().(encoding.TextMarshaler); ok {
		b, err := tm.MarshalText()
		return string(b), err
	}
	switch k.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprint(k.Int()), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		return fmt.Sprint(k.Uint()), nil
	}
	return "", fmt.Errorf("json: unsupported map key type %s", k.Type())
}

// snakeCase names a Go field in snake_case: ActionDigest is
// action_digest, ID is id, HTTPStatus is http_status, P50us is p50us.
func snakeCase(name string) string {
	r := []rune(name)
	var b strings.Builder
	for i, c := range r {
		if unicode.IsUpper(c) {
			prevLower := i > 0 && (unicode.IsLower(r[i-1]) || unicode.IsDigit(r[i-1]))
			nextLower := i > 0 && i+1 < len(r) && unicode.IsUpper(r[i-1]) && unicode.IsLower(r[i+1])
			if prevLower || nextLower {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(c))
			continue
		}
		b.WriteRune(c)
	}
	return b.String()
}
