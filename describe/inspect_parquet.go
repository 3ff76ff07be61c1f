package describe

import (
	"context"
	"path/filepath"

	"github.com/prepml/prep/source"
)

// InspectParquet is the Inspection kind of a Parquet file.
const InspectParquet = "parquet"

// ParquetView is what a feature spec needs from a Parquet file: its rows,
// row groups and leaf columns, read from the footer alone.
type ParquetView struct {
	Path      string          `json:"path"`
	Size      int64           `json:"size"` // bytes
	Rows      int64           `json:"rows"`
	RowGroups int             `json:"row_groups"`
	CreatedBy string          `json:"created_by,omitempty"`
	Columns   []ParquetColumn `json:"columns"`
}

// ParquetColumn is one leaf column: the name a spec's column key takes,
// physical and logical type, and nullability.
type ParquetColumn struct {
	Name         string `json:"name"`     // spec syntax: a.b for a struct field, a\.b for a dotted name
	Physical     string `json:"physical"` // BOOLEAN, INT32, ..., FIXED_LEN_BYTE_ARRAY
	Width        int    `json:"width,omitempty"`
	Logical      string `json:"logical,omitempty"` // STRING, DECIMAL(p,s), TIMESTAMP(unit,utc), ...
	Nullable     bool   `json:"nullable"`
	List         bool   `json:"list,omitempty"`          // one value list per row
	ElemNullable bool   `json:"elem_nullable,omitempty"` // list elements may be null
	Depth        int    `json:"depth,omitempty"`         // levels of lists: 1 a list, 2 a list of lists
	Group        string `json:"group,omitempty"`         // the map or list of structs the leaf belongs to
	MapRole      string `json:"map_role,omitempty"`      // "key" or "value" for a map's leaves
}

// inspectParquet reads path's footer (through source, which owns reading
// Parquet).
func inspectParquet(path string) (*ParquetView, error) {
	st, err := source.NewLocal(filepath.Dir(path))
	if err != nil {
		return nil, err
	}
	d, err := source.Describe(context.Background(), st, filepath.Base(path))
	if err != nil {
		return nil, err
	}
	v := &ParquetView{Path: path, Size: d.File.Size, Rows: d.Rows, RowGroups: len(d.File.RowGroups), CreatedBy: d.CreatedBy}
	for _, c := range d.Columns {
		v.Columns = append(v.Columns, ParquetColumn{Name: c.Name, Physical: c.Physical, Width: c.Width, Logical: c.Logical,
			Nullable: c.Nullable, List: c.List, ElemNullable: c.ElemNullable, Depth: c.Depth, Group: c.Group, MapRole: c.MapRole})
	}
	return v, nil
}
