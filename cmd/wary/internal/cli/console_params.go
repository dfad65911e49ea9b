package cli

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/wary-go/wary/broker/driver"
	"github.com/wary-go/wary/idem"
)

// The console's checks of what a request names: a consumer, an aggregate,
// a message ID. A name the store could not hold (a NUL, say) or that
// breaks the rules of the names the stores and brokers keep is the
// operator's mistake, answered with 400 before any query.

// consumerParam reads ?consumer=, which must be a consumer name (see
// idem.ValidateConsumer) when given, and is required when required.
func consumerParam(r *http.Request, required bool) (string, error) {
	c := r.URL.Query().Get("consumer")
	if c == "" && !required {
		return "", nil
	}
	return c, checkConsumer(c)
}

func checkConsumer(c string) error {
	if err := idem.ValidateConsumer(c); err != nil {
		return badRequest{"consumer: " + err.Error()}
	}
	return nil
}

// aggregateParam reads the aggregate ID q names key: "" (messages
// without one) or an ID by driver.ValidateID's rules.
func aggregateParam(q url.Values, key string) (string, error) {
	a := q.Get(key)
	return a, checkAggregate(key, a)
}

func checkAggregate(key, a string) error {
	if a == "" {
		return nil
	}
	if err := driver.ValidateID(a); err != nil {
		return badRequest{key + ": aggregate ID " + strconv.Quote(a) + ": " + err.Error()}
	}
	return nil
}

// checkIDs checks message IDs by driver.ValidateID's rules.
func checkIDs(key string, ids []string) error {
	for _, id := range ids {
		if err := driver.ValidateID(id); err != nil {
			return badRequest{key + ": " + strconv.Quote(id) + ": " + err.Error()}
		}
	}
	return nil
}
