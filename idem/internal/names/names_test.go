package names

import (
	"errors"
	"strings"
	"testing"
)

func TestValidatePrefixAndTables(t *testing.T) {
	for _, ok := range []string{"", "wary_", "App_", strings.Repeat("p", 63-len("parked_aggregate_idx"))} {
		if err := ValidatePrefix(ok); err != nil {
			t.Errorf("ValidatePrefix(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"1x", "a-b", `a"`, "a;", "a\x00", strings.Repeat("p", 64-len("parked_aggregate_idx"))} {
		if err := ValidatePrefix(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidatePrefix(%q): %v, want ErrInvalidName", bad, err)
		}
	}
	if parts, err := ValidateTableName("app.orders"); err != nil || len(parts) != 2 {
		t.Errorf("schema-qualified: %v %v", parts, err)
	}
	for _, bad := range []string{"a.b.c", ".a", "a.", `a"."b`, "a;drop"} {
		if _, err := ValidateTableName(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateTableName(%q): %v", bad, err)
		}
	}
	if got := QuoteIdentifier(`we"ird`); got != `"we""ird"` {
		t.Errorf("QuoteIdentifier: %s", got)
	}
}

func TestValidateKeyAndProvider(t *testing.T) {
	for _, ok := range []string{"k", "order-1:charge", strings.Repeat("k", MaxKeyLen)} {
		if err := ValidateKey(ok); err != nil {
			t.Errorf("ValidateKey(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", strings.Repeat("k", MaxKeyLen+1), "a\x00b", "\xff"} {
		if err := ValidateKey(bad); !errors.Is(err, ErrInvalidName) {
			t.Errorf("ValidateKey(%q): %v, want ErrInvalidName", bad, err)
		}
	}
	if err := ValidateProvider("stripe"); err != nil {
		t.Errorf("ValidateProvider: %v", err)
	}
	if err := ValidateProvider("a b"); !errors.Is(err, ErrInvalidName) {
		t.Errorf("ValidateProvider(a b): %v, want ErrInvalidName", err)
	}
	err := ValidateIdentifier("schema name", `x"y`)
	if !errors.Is(err, ErrInvalidName) || !strings.Contains(err.Error(), "schema name") {
		t.Errorf("ValidateIdentifier: %v, want ErrInvalidName naming what", err)
	}
}
