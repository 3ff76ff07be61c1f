package source

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/prepml/prep/plan"
)

// ErrSourcesFile is wrapped by every error about the content of a sources
// file (prep plan --sources): its YAML, a missing or unknown key, a bad
// name, path or weight, a file given to two sources.
var ErrSourcesFile = errors.New("bad sources file")

// SourceSpec is one entry of a sources file.
type SourceSpec struct {
	Name string // unique source name (plan.MixSource.Name rules)
	// Paths are files, directories or globs, local or s3:// URLs, as
	// prep plan --source takes them.
	Paths []string
	// Weight is the exact decimal text of the weight ("0.7"), "" when the
	// source has none (it then takes its share by rows).
	Weight string
	// Filter is the row filter's text, "" for none.
	Filter string
	// Partitions are the declared types of hive partition keys, in the
	// order written (selection/SELECTION.md); nil when none is declared.
	Partitions []PartitionDecl
	// Line is the sources file line where the entry starts.
	Line int
}

// PartitionDecl is one declared hive partition key type of a source:
// partitions: {date: date, shard: int, region: string}.
type PartitionDecl struct {
	Key  string // the key, as in its key=value directory levels
	Type string // "int", "date", "timestamp" or "string"
	Line int    // the sources file line of the declaration
}

// SourcesFile is a parsed sources file:
//
//	sources:
//	  - name: web
//	    path: s3://corpus/web/     # or a list of paths
//	    weight: 0.7                # optional
//	    filter: "lang = 'en'"      # optional
//	    partitions:                # optional: hive key types
//	      date: date               # int, date, timestamp or string
//	  - name: code
//	    path: /data/code/
//	    weight: 0.3
//	epoch_samples: 10000000        # optional; default: the sources' rows
//	packing:                       # optional (plan/PLAN.md §12.1)
//	  column: tokens               # a list of INT32 or INT64
//	  length: 2048                 # tokens per packed row
//	  split: chunk                 # chunk (default) or none
//	  eod: 2                       # optional end-of-document id
//	  pad: 0                       # optional, default 0
//	  window: 8192                 # optional, documents packed together
//	  scope: across                # across (default) or per_source
type SourcesFile struct {
	Path         string // the file read, for messages
	Sources      []SourceSpec
	EpochSamples uint64 // 0: the sum of the sources' rows (documents, with packing)
	// Packing packs the documents the mixture draws into rows (plan/PLAN.md
	// §12.1), validated, its scope filled; nil without a packing block.
	Packing *plan.PackOptions
}

type sourcesYAML struct {
	Sources      []sourceYAML `yaml:"sources"`
	EpochSamples yaml.Node    `yaml:"epoch_samples"`
	Packing      *packingYAML `yaml:"packing"`
}

// packingYAML is the packing block of a sources file.
type packingYAML struct {
	Column string    `yaml:"column"`
	Length yaml.Node `yaml:"length"`
	Split  string    `yaml:"split"`
	EOD    yaml.Node `yaml:"eod"`
	Pad    yaml.Node `yaml:"pad"`
	Window yaml.Node `yaml:"window"`
	Scope  string    `yaml:"scope"`
	line   int
}

// packingKeys lists the keys of a packing block, for messages.
const packingKeys = "column, length, split, eod, pad, window, scope"

// UnmarshalYAML decodes the packing block, refusing unknown keys and
// keeping its line.
func (p *packingYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return &unknownSourceKeyError{line: n.Line, key: "packing", msgText: "packing must be a mapping with the keys " + packingKeys}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		switch k := n.Content[i]; k.Value {
		case "column", "length", "split", "eod", "pad", "window", "scope":
		default:
			return &unknownSourceKeyError{line: k.Line, key: k.Value, msgText: fmt.Sprintf("unknown key %q in packing (keys: %s)", k.Value, packingKeys)}
		}
	}
	type plain packingYAML
	var q plain
	if err := n.Decode(&q); err != nil {
		return err
	}
	*p = packingYAML(q)
	p.line = n.Line
	return nil
}

// options converts the block to packing options and validates them,
// returning the line to blame on an error. Errors say which key is wrong
// and why (not wrapped).
func (p *packingYAML) options() (*plan.PackOptions, int, error) {
	o := &plan.PackOptions{Column: strings.TrimSpace(p.Column), Split: plan.Split(p.Split), Scope: plan.PackScope(p.Scope)}
	if o.Scope == "" {
		o.Scope = plan.ScopeAcross
	}
	num := func(key string, n *yaml.Node, lo, hi int64) (int64, error) {
		v, err := strconv.ParseInt(n.Value, 10, 64)
		if n.Kind != yaml.ScalarNode || err != nil {
			return 0, fmt.Errorf("packing: %s %q is not a whole number", key, n.Value)
		}
		if v < lo || v > hi {
			return 0, fmt.Errorf("packing: %s %d not in [%d, %d]", key, v, lo, hi)
		}
		return v, nil
	}
	if p.Length.Kind == 0 {
		return nil, p.line, fmt.Errorf("packing: no length (tokens per packed row)")
	}
	l, err := num("length", &p.Length, 1, plan.MaxPackLength)
	if err != nil {
		return nil, p.Length.Line, err
	}
	o.Length = int(l)
	if p.Window.Kind != 0 {
		w, err := num("window", &p.Window, 1, plan.MaxPackWindow)
		if err != nil {
			return nil, p.Window.Line, err
		}
		o.Window = int(w)
	}
	if p.EOD.Kind != 0 {
		e, err := num("eod", &p.EOD, math.MinInt64, math.MaxInt64)
		if err != nil {
			return nil, p.EOD.Line, err
		}
		o.EOD = &e
	}
	if p.Pad.Kind != 0 {
		if o.Pad, err = num("pad", &p.Pad, math.MinInt64, math.MaxInt64); err != nil {
			return nil, p.Pad.Line, err
		}
	}
	if err := o.Validate(); err != nil {
		return nil, p.line, err
	}
	return o, p.line, nil
}

type sourceYAML struct {
	Name   string    `yaml:"name"`
	Path   yaml.Node `yaml:"path"`
	Weight yaml.Node `yaml:"weight"`
	Filter yaml.Node `yaml:"filter"`
	Parts  yaml.Node `yaml:"partitions"`
	line   int
}

// unknownSourceKeyError is a key of a source entry that the sources file
// does not define, at a 1-based line of the file.
type unknownSourceKeyError struct {
	line    int
	key     string
	msgText string // the message, when not about a source entry's key
}

func (e *unknownSourceKeyError) msg() string {
	if e.msgText != "" {
		return e.msgText
	}
	return fmt.Sprintf("unknown key %q in a source (keys: name, path, weight, filter, partitions)", e.key)
}

func (e *unknownSourceKeyError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg()) }

// UnmarshalYAML decodes one source entry, refusing unknown keys (yaml.v3's
// KnownFields does not reach into a custom unmarshaler) and keeping its line.
func (s *sourceYAML) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			switch k := n.Content[i]; k.Value {
			case "name", "path", "weight", "filter", "partitions":
			default:
				return &unknownSourceKeyError{line: k.Line, key: k.Value}
			}
		}
	}
	type plain sourceYAML
	var p plain
	if err := n.Decode(&p); err != nil {
		return err
	}
	*s = sourceYAML(p)
	s.line = n.Line
	return nil
}

// ReadSourcesFile reads and checks the sources file at path (see
// ParseSourcesFile).
func ReadSourcesFile(path string) (*SourcesFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseSourcesFile(path, data)
}

// ParseSourcesFile parses a sources file's bytes. It checks, before any
// data is read: valid YAML with only the known keys, at least one source,
// every source with a unique name of 1 to 64 [A-Za-z0-9_.-], at least one
// path (all local or all s3://; a relative local path is resolved against
// the sources file's directory, resolvePath), a weight that is a plain decimal number
// greater than 0, a filter, when the key is given, that is a string
// holding more than white space, partitions mapping each key once to int,
// date, timestamp or string, and epoch_samples a positive integer. Errors wrap
// ErrSourcesFile and name the file, the line and the source.
func ParseSourcesFile(path string, data []byte) (*SourcesFile, error) {
	bad := func(line int, format string, args ...any) error {
		loc := path
		if line > 0 {
			loc = fmt.Sprintf("%s:%d", path, line)
		}
		return fmt.Errorf("%s: %s: %w", loc, fmt.Sprintf(format, args...), ErrSourcesFile)
	}
	var y sourcesYAML
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&y); err != nil {
		var uk *unknownSourceKeyError
		if errors.As(err, &uk) {
			return nil, bad(uk.line, "%s", uk.msg())
		}
		return nil, bad(0, "%v (keys: sources: [{name, path, weight, filter, partitions}], epoch_samples, packing: {%s})", err, packingKeys)
	}
	out := &SourcesFile{Path: path}
	if y.Packing != nil {
		po, line, err := y.Packing.options()
		if err != nil {
			return nil, bad(line, "%v", err)
		}
		out.Packing = po
	}
	if y.EpochSamples.Kind != 0 {
		v, err := strconv.ParseUint(y.EpochSamples.Value, 10, 63)
		if y.EpochSamples.Kind != yaml.ScalarNode || err != nil || v == 0 {
			return nil, bad(y.EpochSamples.Line, "epoch_samples %q must be a whole number of samples, at least 1", y.EpochSamples.Value)
		}
		out.EpochSamples = v
	}
	if len(y.Sources) == 0 {
		return nil, bad(0, "no sources: give a list under \"sources:\", each with a name and a path")
	}
	names := map[string]int{}
	for i, s := range y.Sources {
		spec := SourceSpec{Name: s.Name, Line: s.line}
		what := fmt.Sprintf("source %d", i)
		if s.Name != "" {
			what = "source " + s.Name
		}
		if s.Name == "" {
			return nil, bad(s.line, "%s has no name", what)
		}
		if !validMixName(s.Name) {
			return nil, bad(s.line, "%s: the name must be 1 to 64 of A-Z a-z 0-9 _ . -", what)
		}
		if l, ok := names[s.Name]; ok {
			return nil, bad(s.line, "source %s is given twice (first at line %d); names must be unique, and a file belongs to one source (raise its weight to draw it more often)", s.Name, l)
		}
		names[s.Name] = s.line
		switch s.Path.Kind {
		case yaml.ScalarNode:
			spec.Paths = []string{s.Path.Value}
		case yaml.SequenceNode:
			for _, n := range s.Path.Content {
				if n.Kind != yaml.ScalarNode {
					return nil, bad(n.Line, "%s: path entries must be strings", what)
				}
				spec.Paths = append(spec.Paths, n.Value)
			}
		case 0:
		default:
			return nil, bad(s.Path.Line, "%s: path must be a string or a list of strings", what)
		}
		if len(spec.Paths) == 0 || slicesHasEmpty(spec.Paths) {
			return nil, bad(s.line, "%s has no path: give a file, directory or glob, or an s3:// URL", what)
		}
		for j, p := range spec.Paths {
			spec.Paths[j] = resolvePath(path, p)
		}
		if s.Weight.Kind != 0 {
			if s.Weight.Kind != yaml.ScalarNode {
				return nil, bad(s.Weight.Line, "%s: weight must be a number", what)
			}
			if w := strings.TrimSpace(s.Weight.Value); strings.HasPrefix(w, "-") {
				return nil, bad(s.Weight.Line, "%s: weight %s must be greater than 0", what, w)
			}
			if _, err := plan.ParseWeight(s.Weight.Value); err != nil {
				return nil, bad(s.Weight.Line, "%s: %v", what, err)
			}
			spec.Weight = s.Weight.Value
		}
		if s.Filter.Kind != 0 {
			if s.Filter.Kind != yaml.ScalarNode {
				return nil, bad(s.Filter.Line, "%s: filter must be a string: \"lang = 'en'\"", what)
			}
			spec.Filter = strings.TrimSpace(s.Filter.Value)
			if spec.Filter == "" {
				return nil, bad(s.Filter.Line, "%s: filter is empty: give a row filter (\"lang = 'en'\"), or leave the key out to take every row", what)
			}
		}
		if s.Parts.Kind != 0 {
			if s.Parts.Kind != yaml.MappingNode {
				return nil, bad(s.Parts.Line, "%s: partitions must map each key to its type: {date: date, shard: int, region: string}", what)
			}
			for j := 0; j+1 < len(s.Parts.Content); j += 2 {
				k, v := s.Parts.Content[j], s.Parts.Content[j+1]
				if v.Kind != yaml.ScalarNode || (v.Value != "int" && v.Value != "date" && v.Value != "timestamp" && v.Value != "string") {
					return nil, bad(v.Line, "%s: partition key %s: type %q: want int, date, timestamp or string", what, k.Value, v.Value)
				}
				if k.Value == "" || strings.ContainsAny(k.Value, "=/") {
					return nil, bad(k.Line, "%s: partition key %q: a key is the text before '=' in a directory level", what, k.Value)
				}
				for _, d := range spec.Partitions {
					if d.Key == k.Value {
						return nil, bad(k.Line, "%s: partition key %s is declared twice (first at line %d)", what, k.Value, d.Line)
					}
				}
				spec.Partitions = append(spec.Partitions, PartitionDecl{Key: k.Value, Type: v.Value, Line: k.Line})
			}
		}
		out.Sources = append(out.Sources, spec)
	}
	remote := 0
	for _, s := range out.Sources {
		for _, p := range s.Paths {
			if IsS3URL(p) {
				remote++
			}
		}
	}
	if total := pathCount(out.Sources); remote != 0 && remote != total {
		return nil, bad(0, "local paths and s3:// URLs cannot be mixed in one plan (one plan reads one root)")
	}
	return out, nil
}

// resolvePath is a source's path p as written in the sources file at
// file: an s3:// URL or an absolute path as it is, a relative one (a file,
// directory or glob) joined to the sources file's directory, as compose
// files, dbt and Hydra resolve theirs; the working directory plays no part.
// An error reading it names the joined path, the one tried.
func resolvePath(file, p string) string {
	if IsS3URL(p) || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(filepath.Dir(file), p)
}

func validMixName(s string) bool {
	if len(s) < 1 || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '.' || r == '-') {
			return false
		}
	}
	return true
}

func slicesHasEmpty(ss []string) bool {
	for _, s := range ss {
		if strings.TrimSpace(s) == "" {
			return true
		}
	}
	return false
}

func pathCount(ss []SourceSpec) int {
	n := 0
	for _, s := range ss {
		n += len(s.Paths)
	}
	return n
}

// Combine joins sources discovered one per sources-file entry into the
// plan's one source: their deepest common root (a local directory, or an
// s3:// prefix of one bucket), every file's path made relative to it. It
// returns, for each part, its files' new paths (sorted byte-wise, empty
// files included), as plan.MixSource.Files takes them. A file in two
// parts is refused (wrapping ErrSourcesFile, naming both sources): its
// rows could not name their source. Parts from different buckets, or local
// and remote, are refused too. The files the parts' discoveries left out as
// not Parquet are the combined source's Skipped, sorted.
func Combine(names []string, parts []plan.Source) (plan.Source, [][]string, error) {
	if len(parts) == 0 || len(parts) != len(names) {
		return plan.Source{}, nil, fmt.Errorf("combining %d sources with %d names: %w", len(parts), len(names), ErrSourcesFile)
	}
	var root string
	var rebase func(p plan.Source, path string) string
	if IsS3URL(parts[0].Root) {
		bucket, prefixes := "", make([]string, len(parts))
		for i, p := range parts {
			rest, ok := strings.CutPrefix(p.Root, "s3://")
			b, pre, _ := strings.Cut(rest, "/")
			if !ok || i > 0 && b != bucket {
				return plan.Source{}, nil, fmt.Errorf("sources %s and %s are in different stores (%s, %s); one plan reads one root: %w", names[0], names[i], parts[0].Root, p.Root, ErrSourcesFile)
			}
			bucket, prefixes[i] = b, pre
		}
		common := prefixes[0]
		for _, pre := range prefixes[1:] {
			for !strings.HasPrefix(pre, common) {
				common = common[:strings.LastIndex(strings.TrimSuffix(common, "/"), "/")+1]
			}
		}
		root = "s3://" + bucket + "/" + common
		rebase = func(p plan.Source, path string) string {
			return strings.TrimPrefix(p.Root, root) + path
		}
	} else {
		var dirs []string
		for i, p := range parts {
			if IsS3URL(p.Root) {
				return plan.Source{}, nil, fmt.Errorf("sources %s and %s: local paths and s3:// URLs cannot be mixed in one plan: %w", names[0], names[i], ErrSourcesFile)
			}
			dirs = append(dirs, filepath.Join(p.Root, "x"))
		}
		root = commonDir(dirs)
		rebase = func(p plan.Source, path string) string {
			rel, _ := filepath.Rel(root, filepath.Join(p.Root, filepath.FromSlash(path)))
			return filepath.ToSlash(rel)
		}
	}
	out := plan.Source{Root: root}
	files := make([][]string, len(parts))
	owner := map[string]int{}
	for i, p := range parts {
		add := func(f plan.SourceFile, empty bool) error {
			f.Path = rebase(p, f.Path)
			if j, ok := owner[f.Path]; ok {
				return fmt.Errorf("file %s is in both source %s and source %s; a file belongs to one source (raise a weight to draw a source more often): %w", f.Path, names[j], names[i], ErrSourcesFile)
			}
			owner[f.Path] = i
			files[i] = append(files[i], f.Path)
			if empty {
				out.EmptyFiles = append(out.EmptyFiles, f)
			} else {
				out.Files = append(out.Files, f)
			}
			return nil
		}
		for _, f := range p.Files {
			if err := add(f, false); err != nil {
				return plan.Source{}, nil, err
			}
		}
		for _, f := range p.EmptyFiles {
			if err := add(f, true); err != nil {
				return plan.Source{}, nil, err
			}
		}
		sort.Strings(files[i])
		out.Skipped = append(out.Skipped, p.Skipped...)
	}
	sort.Strings(out.Skipped)
	if err := out.Normalize(); err != nil {
		return plan.Source{}, nil, err
	}
	return out, files, nil
}
