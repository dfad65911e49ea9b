package mysql

// SetReadLimit makes the store opened with o read outbox rows of at most
// n bytes, as if max_allowed_packet were n.
func SetReadLimit(o *Options, n int64) { o.readLimit = n }
