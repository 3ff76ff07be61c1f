package feature

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Number is a fill or pad value from a spec: an integer (kept exact in
// int64 range), a float, or one of "NaN", "+Inf", "Inf", "-Inf". Its JSON form
// is a canonical string ("-1", "1.5", "NaN", "+Inf") so NaN survives JSON.
type Number struct {
	isInt bool
	i     int64
	f     float64
}

// IntNumber returns the Number v.
func IntNumber(v int64) *Number { return &Number{isInt: true, i: v, f: float64(v)} }

// FloatNumber returns the Number v (integral values stay floats).
func FloatNumber(v float64) *Number { return &Number{f: v} }

// ParseNumber parses an integer, a float, or NaN/+Inf/Inf/-Inf (case-insensitive).
func ParseNumber(s string) (*Number, error) {
	t := strings.TrimSpace(s)
	if i, err := strconv.ParseInt(t, 0, 64); err == nil {
		return IntNumber(i), nil
	}
	switch strings.ToLower(t) {
	case "nan", ".nan":
		return FloatNumber(math.NaN()), nil
	case "inf", "+inf", ".inf", "+.inf":
		return FloatNumber(math.Inf(1)), nil
	case "-inf", "-.inf":
		return FloatNumber(math.Inf(-1)), nil
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return nil, fmt.Errorf("%q is not a number", s)
	}
	return FloatNumber(f), nil
}

// String returns the canonical text of n.
func (n *Number) String() string {
	if n.isInt {
		return strconv.FormatInt(n.i, 10)
	}
	switch {
	case math.IsNaN(n.f):
		return "NaN"
	case math.IsInf(n.f, 1):
		return "+Inf"
	case math.IsInf(n.f, -1):
		return "-Inf"
	}
	s := strconv.FormatFloat(n.f, 'g', -1, 64)
	if !strings.ContainsAny(s, ".eEn") {
		s += ".0" // keep floats distinct from integers
	}
	return s
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (n *Number) UnmarshalYAML(node *yaml.Node) error {
	if node.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a number, not a %s", node.Line, kindName(node.Kind))
	}
	v, err := ParseNumber(node.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", node.Line, err)
	}
	*n = *v
	return nil
}

// MarshalJSON implements json.Marshaler.
func (n *Number) MarshalJSON() ([]byte, error) { return json.Marshal(n.String()) }

// UnmarshalJSON implements json.Unmarshaler; it accepts the canonical string
// or a JSON number.
func (n *Number) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		s = string(b)
	}
	v, err := ParseNumber(s)
	if err != nil {
		return err
	}
	*n = *v
	return nil
}
