package convert

import "errors"

// ErrOutputMismatch is returned when the output directory already holds a
// manifest made from another plan, source or spec and Options.Force is not
// set.
var ErrOutputMismatch = errors.New("output directory holds a different shard set")
