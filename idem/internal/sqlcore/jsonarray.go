package sqlcore

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// JSONArray is ids as a JSON array, for a dialect whose ClaimMany reads
// its $2 as JSON (SQLite's json_each, MySQL's JSON_TABLE); false where
// JSON would not carry one of them exactly (invalid UTF-8, which it
// replaces, or a NUL).
func JSONArray(ids []string) (any, bool) {
	for _, id := range ids {
		if !utf8.ValidString(id) || strings.ContainsRune(id, 0) {
			return nil, false
		}
	}
	b, err := json.Marshal(ids)
	return string(b), err == nil
}
