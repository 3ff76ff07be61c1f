package feature

import (
	"fmt"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"
)

// unknownKey checks every mapping key of the YAML document doc against the
// spec's keys (the yaml tags of Spec and the policies under it) before it
// is decoded, so that a typo is reported with its place and a suggestion
// instead of the decoder's "field x not found in type convert.TensorSpec":
//
//	line 3: unknown key tensors[0].colum (did you mean column?)
//
// The suggestion is the key of that mapping nearest in edit distance when
// it is one edit away; else a key of a policy one level down of that
// exact name ("it belongs under list: list.jagged"); else the nearest key
// of the mapping within 2 edits or half the key's length; else the list
// of valid keys. It returns nil when every key is known.
func unknownKey(doc *yaml.Node) error {
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	return checkKeys(doc, reflect.TypeFor[Spec](), "")
}

// checkKeys walks node as a value of Go type t, path its key path.
func checkKeys(node *yaml.Node, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
		return nil // decodes itself (Number)
	}
	switch {
	case t.Kind() == reflect.Slice && node.Kind == yaml.SequenceNode:
		for i, c := range node.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case t.Kind() == reflect.Struct && node.Kind == yaml.MappingNode:
		fields := yamlFields(t)
		for i := 0; i+1 < len(node.Content); i += 2 {
			k, v := node.Content[i], node.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				continue // the decoder reports it
			}
			key := path + "." + k.Value
			if path == "" {
				key = k.Value
			}
			ft, ok := fields[k.Value]
			if !ok {
				return fmt.Errorf("line %d: unknown key %s%s", k.Line, key, suggestKey(k.Value, fields))
			}
			if err := checkKeys(v, ft, key); err != nil {
				return err
			}
		}
	}
	return nil
}

// yamlFields maps the yaml keys of struct type t to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
	return out
}

// suggestKey returns " (did you mean K?)" for the key of fields nearest to
// key, " (it belongs under P: P.key)" when key is a key of the policy P
// one level down (each such policy named), or the valid keys.
func suggestKey(key string, fields map[string]reflect.Type) string {
	names := make([]string, 0, len(fields))
	for n := range fields {
		names = append(names, n)
	}
	slices.Sort(names)
	best, bestD := "", -1
	for _, n := range names {
		if d := editDistance(strings.ToLower(key), n); bestD < 0 || d < bestD {
			best, bestD = n, d
		}
	}
	var under, paths []string
	for _, n := range names {
		t := fields[n]
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() == reflect.Struct {
			if _, ok := yamlFields(t)[key]; ok {
				under, paths = append(under, n), append(paths, n+"."+key)
			}
		}
	}
	switch {
	case bestD >= 0 && bestD <= 1, bestD >= 0 && bestD <= max(2, (len(key)+1)/2) && len(under) == 0:
		return fmt.Sprintf(" (did you mean %s?)", best)
	case len(under) > 0:
		return fmt.Sprintf(" (it belongs under %s: %s)", strings.Join(under, " or "), strings.Join(paths, ", "))
	}
	return " (valid keys: " + strings.Join(names, ", ") + ")"
}

// editDistance is the Levenshtein distance between a and b (insertions,
// deletions and substitutions of bytes, each costing 1).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
