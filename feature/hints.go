package feature

import (
	"fmt"

	"github.com/prepml/prep/pqread"
)

// isText reports whether column c holds text: a STRING, ENUM or JSON
// annotation (BSON and unannotated binary are bytes: images, encoded
// blobs).
func isText(c pqread.ColumnInfo) bool {
	switch c.Logical {
	case "STRING", "ENUM", "JSON":
		return true
	}
	return false
}

// tooLong is the error of a value of n bytes over max_len L of the bytes
// policy named policy ("bytes", "map.key_bytes"), with the fix that keeps
// the data right: truncation only for text, where a prefix is still a
// meaningful value; for binary values (an image, an encoded blob, whose
// prefix is corrupt) a larger max_len or hashing.
func (tp *tensorPlan) tooLong(policy string, n, L int) error {
	if tp.text {
		return ValueErrorf("value is %d bytes long, more than max_len %d (set %s.truncate to keep the first %d, or raise %s.max_len)", n, L, policy, L, policy)
	}
	return ValueErrorf("value is %d bytes long, more than max_len %d (raise %s.max_len to at least %d, or use %s.mode hash; truncating binary values such as images or encoded blobs would corrupt them)", n, L, policy, n, policy)
}

// bytesModeHint is the fix of a string or binary column read without a
// bytes policy: in a spec file, bytes.mode; for a --tensor flag, which
// cannot declare one, the spec file to write.
func bytesModeHint(t *TensorSpec) string {
	if t.fromFlag {
		return fmt.Sprintf("--tensor cannot declare a bytes policy: give this tensor in a spec file (--spec) with bytes: {mode: hash, buckets: N} (dtype I64) or bytes: {mode: pad, max_len: L} (dtype U8), e.g. tensors: [{name: %s, column: %s, dtype: I64, bytes: {mode: hash, buckets: 1048576}}]", t.Name, t.Column)
	}
	return "set bytes.mode hash or pad"
}

// flagSpecFile is appended to a hint made of spec keys when the tensor
// came from a --tensor flag, which cannot set them.
func flagSpecFile(t *TensorSpec) string {
	if t.fromFlag {
		return ", in a spec file (--spec): --tensor cannot declare them"
	}
	return ""
}

// listLengthHint is the fix of a list row whose length differs from the
// tensor's fixed length: pad and truncate it, or read the column as a
// jagged tensor (its lengths kept); for a --tensor flag, the flag's
// jagged form, padding being a spec file's.
func listLengthHint(t *TensorSpec) string {
	if t.fromFlag {
		col := t.Column
		if col == "" {
			col = "COL"
		}
		return fmt.Sprintf("keep every length as a jagged tensor with --tensor %s=%s:%s:jagged, or pad and truncate to one length with list.pad and list.truncate in a spec file (--spec)", t.Name, col, t.DType)
	}
	return "keep every length with list: {jagged: true} (a jagged tensor), or pad and truncate to one length with list.pad and list.truncate"
}
