// Package duckdbtest runs DuckDB as a reader independent of prep's own
// Parquet reader, for tests that check prep's output against another
// implementation's reading of the same file.
//
// DuckDB runs as Node.js with @duckdb/node-api (prebuilt native bindings),
// which `make duckdb` installs into .cache/duckdb at the repository root; the
// script test/duckdb/query.mjs runs the SQL and prints the result as JSON.
// Where node or the module is missing, Query skips the test with a message
// saying how to install it, except under CI=true, where it fails the test:
// CI installs DuckDB, so a missing reader there is a broken setup, not a
// reason to pass.
//
// It is imported only from _test.go files.
package duckdbtest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// ModuleDirEnv names the environment variable that overrides where
// @duckdb/node-api is installed (a folder holding node_modules/); the
// default is .cache/duckdb under the repository root.
const ModuleDirEnv = "PREP_DUCKDB_DIR"

// Column is one result column: its name and DuckDB's text for its type
// (for example "BIGINT", "INTEGER[]", "MAP(VARCHAR, INTEGER)").
type Column struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

// Result is the result of the last statement of a Query. Rows[i][j] is the
// value of column j in row i, decoded from the JSON that query.mjs writes
// (see its header): nil for NULL; json.Number for every number (64-bit
// integers exact, floats the shortest literal of the double, -0 as "-0");
// the strings "NaN", "+Inf", "-Inf" for those floats; string; bool; []any
// for a LIST or ARRAY; map[string]any for a STRUCT; []any of
// map[string]any{"key", "value"} for a MAP; a base64 string for a BLOB.
type Result struct {
	Columns []Column `json:"columns"`
	Rows    [][]any  `json:"rows"`
}

// Col returns the index of the column called name, failing t when the
// result has none.
func (r *Result) Col(t testing.TB, name string) int {
	t.Helper()
	for i, c := range r.Columns {
		if c.Name == name {
			return i
		}
	}
	t.Fatalf("duckdb result has no column %q (columns %v)", name, r.Columns)
	return -1
}

// setup is what Query needs, found once per test binary.
type setup struct {
	node, script, modules string
	err                   error // why DuckDB cannot run here; nil when it can
}

var (
	once  sync.Once
	found setup
)

// locate finds node, the repository root (the nearest folder above the
// working directory whose go.mod declares module github.com/prepml/prep),
// the query script and the installed module.
func locate() setup {
	var s setup
	node, err := exec.LookPath("node")
	if err != nil {
		s.err = fmt.Errorf("node is not on PATH (Debian: apt-get install nodejs npm; then make duckdb)")
		return s
	}
	s.node = node
	root, err := repoRoot()
	if err != nil {
		s.err = err
		return s
	}
	s.script = filepath.Join(root, "test", "duckdb", "query.mjs")
	if _, err := os.Stat(s.script); err != nil {
		s.err = fmt.Errorf("query script: %v", err)
		return s
	}
	s.modules = os.Getenv(ModuleDirEnv)
	if s.modules == "" {
		s.modules = filepath.Join(root, ".cache", "duckdb")
	}
	if _, err := os.Stat(filepath.Join(s.modules, "node_modules", "@duckdb", "node-api", "package.json")); err != nil {
		s.err = fmt.Errorf("@duckdb/node-api is not installed in %s (run make duckdb)", s.modules)
	}
	return s
}

func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && strings.HasPrefix(string(b), "module github.com/prepml/prep\n") {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no prep repository root above the working directory")
		}
		dir = up
	}
}

// Available returns nil when DuckDB can run here, else the reason it
// cannot (node missing, module not installed).
func Available() error {
	once.Do(func() { found = locate() })
	return found.err
}

// Require skips t when DuckDB cannot run here, naming the reason and the
// install step, or fails t when the environment has CI=true.
func Require(t testing.TB) {
	t.Helper()
	if err := Available(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("DuckDB reader missing under CI=true: %v", err)
		}
		t.Skipf("DuckDB reader not available: %v", err)
	}
}

// Query runs the semicolon-separated SQL statements in one in-memory DuckDB
// database and returns the result of the last one. It calls Require first,
// and fails t on an SQL error, naming DuckDB's message and the SQL.
func Query(t testing.TB, sql string) *Result {
	t.Helper()
	Require(t)
	cmd := exec.Command(found.node, found.script, found.modules)
	cmd.Stdin = strings.NewReader(sql)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("duckdb: %v\n%s\nSQL:\n%s", err, strings.TrimSpace(stderr.String()), sql)
	}
	d := json.NewDecoder(&stdout)
	d.UseNumber()
	var r Result
	if err := d.Decode(&r); err != nil {
		t.Fatalf("duckdb: decoding the result: %v\nSQL:\n%s", err, sql)
	}
	return &r
}

// Quote returns s as an SQL string literal: in single quotes, each single
// quote doubled. It is how a test puts a file path into a query.
func Quote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}

// Int64 returns the integer value v (a json.Number from a Result), failing
// t when v is not an integer that fits int64 (NULL included).
func Int64(t testing.TB, v any) int64 {
	t.Helper()
	n, ok := v.(json.Number)
	if !ok {
		t.Fatalf("duckdb value %#v is not a number", v)
	}
	i, err := strconv.ParseInt(n.String(), 10, 64)
	if err != nil {
		t.Fatalf("duckdb value %s is not an int64: %v", n, err)
	}
	return i
}

// Float64 returns the float value v from a Result: a json.Number parsed
// exactly (-0 keeps its sign), or "NaN", "+Inf", "-Inf". It fails t on
// anything else, NULL included.
func Float64(t testing.TB, v any) float64 {
	t.Helper()
	switch v := v.(type) {
	case json.Number:
		f, err := strconv.ParseFloat(v.String(), 64)
		if err != nil {
			t.Fatalf("duckdb value %s is not a float: %v", v, err)
		}
		return f
	case string:
		switch v {
		case "NaN":
			return math.NaN()
		case "+Inf":
			return math.Inf(1)
		case "-Inf":
			return math.Inf(-1)
		}
	}
	t.Fatalf("duckdb value %#v is not a float", v)
	return 0
}

// List returns the LIST or ARRAY value v from a Result, failing t when v is
// anything else (NULL included).
func List(t testing.TB, v any) []any {
	t.Helper()
	l, ok := v.([]any)
	if !ok {
		t.Fatalf("duckdb value %#v is not a list", v)
	}
	return l
}

// Blob returns the bytes of the BLOB value v from a Result, failing t when
// v is not one.
func Blob(t testing.TB, v any) []byte {
	t.Helper()
	s, ok := v.(string)
	if !ok {
		t.Fatalf("duckdb value %#v is not a blob", v)
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("duckdb value %q is not base64: %v", s, err)
	}
	return b
}
