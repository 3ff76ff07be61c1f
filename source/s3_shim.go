package source

import "fmt"

// ChangedError is returned when a source object no longer is the version
// a plan or an earlier read saw: its ETag or size differs.
type ChangedError struct {
	Name   string // the object (s3://bucket/key) or file
	Reason string // what differs
}

func (e *ChangedError) Error() string {
	return fmt.Sprintf("%s: source changed: %s", e.Name, e.Reason)
}
