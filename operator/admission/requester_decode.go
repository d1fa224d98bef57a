package admission

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// decodeObject decodes an admission review's object into obj. A value of the
// wrong type is refused as the API server would refuse it, naming its path
// (spec.parameters.replicas, spec.steps[1].execution.parameters.replicas) and
// the type the field takes, never with the Go decoder's message.
func decodeObject(raw []byte, obj any) error {
	err := json.Unmarshal(raw, obj)
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) {
		if err != nil {
			return fmt.Errorf("decode object: %w", err)
		}
		return nil
	}
	want := jsonType(te.Type)
	path, value := valueAt(raw, te.Offset)
	if path == nil {
		path = field.NewPath(te.Field)
	}
	if value == nil {
		return invalid(field.TypeInvalid(path, field.OmitValueType{}, fmt.Sprintf("must be of type %s, not %s", want, te.Value)))
	}
	return invalid(field.TypeInvalid(path, value, "must be of type "+want))
}

// jsonType names t as JSON Schema does.
func jsonType(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Pointer:
		return jsonType(t.Elem())
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("integer (%s)", t.Kind())
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.String:
		return "string"
	case reflect.Slice, reflect.Array:
		return "array"
	default:
		return "object"
	}
}

// valueAt finds the value that ends at or spans offset in raw (the offset
// json.UnmarshalTypeError reports): its path, and the value itself when it
// is a scalar (nil for an object or array).
func valueAt(raw []byte, offset int64) (*field.Path, any) {
	type frame struct {
		path    *field.Path
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*frame
	top := func() *frame {
		if len(stack) == 0 {
			return nil
		}
		return stack[len(stack)-1]
	}
	next := func() {
		if f := top(); f != nil && f.array {
			f.index++
		} else if f != nil {
			f.wantKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil, nil
		}
		f := top()
		d, delim := tok.(json.Delim)
		if delim && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			next()
			continue
		}
		if f != nil && !f.array && f.wantKey {
			f.key, f.wantKey = tok.(string), false
			continue
		}
		var path *field.Path
		switch {
		case f == nil:
		case f.array:
			path = f.path.Index(f.index)
		case f.path == nil:
			path = field.NewPath(f.key)
		default:
			path = f.path.Child(f.key)
		}
		if dec.InputOffset() >= offset {
			if delim {
				return path, nil
			}
			if n, ok := tok.(json.Number); ok {
				if i, err := n.Int64(); err == nil {
					return path, i
				}
				return path, n.String()
			}
			return path, tok
		}
		if delim {
			stack = append(stack, &frame{path: path, array: d == '[', wantKey: d == '{'})
			continue
		}
		next()
	}
}
