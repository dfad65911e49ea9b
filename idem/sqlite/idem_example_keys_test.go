package sqlite_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/wary-go/wary/idem/keys"
)

func Example_keys() {
	ctx := context.Background()
	st, _, _, cleanup := setup(ctx)
	defer cleanup()

	// The provider keeps keys for a day and replays the first result.
	payments, err := keys.New[*sql.Tx](st, keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true}, nil)
	if err != nil {
		log.Fatal(err)
	}
	charges := 0
	charge := func(ctx context.Context, key string, intent []byte) ([]byte, error) {
		// Send key as the provider's Idempotency-Key header.
		charges++
		return []byte("ch_1"), nil
	}

	// Stage the payment in the transaction that decides it...
	tx, err := st.DB().BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := payments.Stage(ctx, tx, "payment:order-1:attempt-1", []byte(`{"amount":42}`)); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		log.Fatal(err)
	}
	// ...and call after the commit. A second Call (a retry, a duplicate
	// message) returns the stored outcome without calling.
	for range 2 {
		rec, err := payments.Call(ctx, "payment:order-1:attempt-1", charge)
		fmt.Println(rec.State, string(rec.Result), err)
	}
	fmt.Println("charges:", charges)
	// Output:
	// succeeded ch_1 <nil>
	// succeeded ch_1 <nil>
	// charges: 1
}
