package soak

// Unsafe returns cfg with consumers that apply effects without the inbox
// and the version check, so that the soak's tests can see a run fail.
func Unsafe(cfg Config) Config {
	cfg.unsafe = true
	return cfg
}
