package source

import (
	"context"

	"github.com/prepml/prep/plan"
	"github.com/prepml/prep/pqread"
)

// Description is what a footer tells about one file beyond its plan
// record: rows, the writer, and the leaf columns (the names a feature spec
// takes, physical and logical types, nullability).
type Description struct {
	File      plan.SourceFile // path, size, footer SHA-256, row groups
	Rows      int64
	CreatedBy string
	Columns   []pqread.ColumnInfo
}

// Describe reads and validates the footer of the named file of st (the
// checks of Discover) and describes it. Errors are *Error values naming the
// file.
func Describe(ctx context.Context, st Store, name string) (*Description, error) {
	obj, err := st.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	pf, err := openParquet(obj, pqread.Limits{})
	if err != nil {
		return nil, err
	}
	defer pf.Close()
	return &Description{
		File:      plan.SourceFile{Path: name, Size: pf.Size(), FooterSHA256: pf.FooterSHA256(), RowGroups: pf.RowGroups()},
		Rows:      pf.NumRows(),
		CreatedBy: pf.CreatedBy(),
		Columns:   pf.Columns(),
	}, nil
}
