package verify

import (
	"github.com/prepml/prep/pqread"
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
}

// inspectParquet reads path's footer.
func inspectParquet(path string) (*ParquetView, error) {
	f, err := pqread.Open(path, pqread.Limits{})
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v := &ParquetView{Path: path, Size: f.Size(), Rows: f.NumRows(), RowGroups: len(f.RowGroups()), CreatedBy: f.CreatedBy()}
	for _, c := range f.Columns() {
		v.Columns = append(v.Columns, ParquetColumn{Name: c.Name, Physical: c.Physical, Width: c.Width, Logical: c.Logical,
			Nullable: c.Nullable, List: c.List, ElemNullable: c.ElemNullable})
	}
	return v, nil
}
