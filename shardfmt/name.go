package shardfmt

import "strings"

// FileStem returns the form a tensor name takes as a file name (prep
// export writes tensor t as FileStem(t)+".npy", and a jagged tensor's
// offsets as FileStem(t+"_offsets")+".npy"): every '/', '\\' and NUL byte
// becomes '_', and "", "." and ".." get a leading '_'. Two names with one
// stem would overwrite each other's files, so a feature spec whose outputs
// share a stem is refused (convert.Spec.Validate).
func FileStem(name string) string {
	name = strings.Map(func(r rune) rune {
		if r == '/' || r == '\\' || r == 0 {
			return '_'
		}
		return r
	}, name)
	if name == "" || name == "." || name == ".." {
		name = "_" + name
	}
	return name
}
