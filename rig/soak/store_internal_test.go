package soak

import (
	"strings"
	"testing"
)

// A configuration that names no store, both, or a MySQL server the proxy
// cannot stand in front of fails before anything is created, saying why.
func TestOpenDatabaseRefusesBadStores(t *testing.T) {
	for _, c := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"none", Config{}, "must name the store's server"},
		{"both", Config{Postgres: "postgres://127.0.0.1:1/x", MySQL: "root@tcp(127.0.0.1:1)/x"}, "both set"},
		{"unix socket", Config{MySQL: "root:secret@unix(/tmp/mysql.sock)/x"}, "over tcp(HOST:PORT), not unix"},
		{"postgres without host", Config{Postgres: "postgres:///x"}, "postgres://HOST:PORT/DB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := openDatabase(t.Context(), c.cfg)
			if err == nil {
				d.close()
				t.Fatal("opened")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "secret") {
				t.Fatalf("error %q, want it to say %q and quote no password", err, c.want)
			}
		})
	}
}
