package convert

// maxrssUnit is the unit of getrusage's ru_maxrss in bytes: macOS reports
// bytes (getrusage(2)).
const maxrssUnit = 1
