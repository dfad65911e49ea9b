package keys_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/wary-go/wary/idem/keys"
	"github.com/wary-go/wary/idem/postgres"
	"github.com/wary-go/wary/internal/pgexample"
)

// A payment is staged in the transaction that decides it and called
// after the commit, with its key as the provider's idempotency key; a
// second Call (a retry, a duplicate message) returns the stored outcome
// without calling. It runs on the PostgreSQL server at WARY_POSTGRES_URL;
// idem/sqlite's examples show the same on SQLite.
func ExampleCaller_Call() {
	ctx := context.Background()
	schema := fmt.Sprintf("payments_%d", os.Getpid())
	pool, drop := pgexample.Pool(ctx, schema)
	defer drop()
	st, err := postgres.New(ctx, pool, &postgres.Options{Schema: schema})
	if err != nil {
		log.Fatal(err)
	}

	// The provider keeps keys for a day and replays the first result.
	payments, err := keys.New[pgx.Tx](st, keys.Contract{Provider: "payments", Retention: 24 * time.Hour, Replays: true}, nil)
	if err != nil {
		log.Fatal(err)
	}
	charges := 0
	charge := func(ctx context.Context, key string, intent []byte) ([]byte, error) {
		// Send key as the provider's Idempotency-Key header.
		charges++
		return []byte("ch_1"), nil
	}

	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if _, err := payments.Stage(ctx, tx, "payment:order-1:attempt-1", []byte(`{"amount":42}`)); err != nil {
		log.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
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
