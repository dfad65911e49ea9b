// Package servicebus is the wary driver for Azure Service Bus, on the
// azservicebus SDK.
//
// Every constructor takes the same things in the same order: the caller's
// context, which bounds the open's reads through Admin (the driver sets no
// timeout of its own), the SDK client (the caller's, shared and not closed
// by the driver), the entity's name, and the options, whose portable part
// is the embedded broker.TopicOptions or broker.SubscriptionOptions:
//
//	client, err := azservicebus.NewClientFromConnectionString(cs, nil)
//	ac, err := admin.NewClientFromConnectionString(cs, nil)
//	orders, err := servicebus.OpenTopic(ctx, client, "orders", &servicebus.TopicOptions{Admin: ac})
//	sub, err := servicebus.OpenSubscription(ctx, client, "orders/Subscriptions/billing",
//		&servicebus.SubscriptionOptions{Admin: ac})
//	dl, err := servicebus.OpenDeadLetters(ctx, client, "orders/Subscriptions/billing",
//		&servicebus.SubscriptionOptions{Admin: ac})
//
// OpenTopic sends to a queue or a topic. OpenSubscription receives from a
// queue ("orders"), a topic subscription ("orders/Subscriptions/billing",
// the SDK's own path form, so one string names it everywhere), or the
// dead-letter queue of either (".../$DeadLetterQueue"). OpenDeadLetters
// receives from the dead-letter sub-queue of the queue or subscription
// it is given.
//
// Capabilities come from the entity, each side's from its own: with an
// administration client (Options.Admin) a topic reads RequiresSession,
// the duplicate detection window and the size limit (what a publisher is
// promised), and a subscription RequiresSession, the lock duration,
// MaxDeliveryCount and the default time to live (what a consumer is
// promised), when it opens; a missing entity is ErrNotFound, an
// administration API that does not answer an *EntityReadError (which says
// how to reach it), and Options.Entity fields that state other values than
// the entity holds are reported, not used. Without one (a principal
// without Manage rights) each believes its Options.Entity
// (TopicProperties, SubscriptionProperties), the service's defaults
// filling what is zero. A topic entity does not know whether its
// subscriptions require sessions (and so a key): that is declared through
// TopicOptions.Entity.
//
// The capabilities' Source says which it was (capability.Source): Read names
// the entity read through the administration API; Conflicts lists each
// setting the URL or Options.Entity states otherwise than the entity, with
// the entity's value, which applies, and the fix; without an
// administration client (read_entity=false in a URL) every entity setting
// of the side (delivery limit, lock, time to live and sessions for a
// subscription; duplicate detection, size and, for a queue, sessions for a
// topic) is Unread, with how to read it, so that guarantee.Explain states
// it as unknown rather than as the broker's.
//
// # URLs
//
// Importing the package registers the scheme "servicebus" on
// broker.DefaultURLMux:
//
//	servicebus://orders                                  (queue or topic)
//	servicebus://orders/Subscriptions/billing?max_sessions=16
//	servicebus://orders/$DeadLetterQueue
//
// The connection string comes from the environment variable
// WARY_SERVICEBUS_CONNECTION_STRING (or URLOpener.ConnectionString), never
// from the URL, and is never printed: errors that could quote it have its
// SharedAccessKey removed. URLOpener documents the parameters; a topic or
// subscription opened by URL owns its client and closes it. The URL opener
// reads the entity through the administration API (read_entity=true, the
// default) at the namespace's https endpoint, or where the environment
// variable WARY_SERVICEBUS_ADMIN_ENDPOINT (or URLOpener.AdminEndpoint)
// says: an emulator, Microsoft's (http://127.0.0.1:5300) or wary's (package
// sbemu), serves that API on a port of its own, over plain HTTP, which is
// accepted on loopback only.
//
// # Delivery semantics
//
// Publishing: Message.ID is the MessageId (at most 128 characters, as the
// service allows; a longer one is refused before sending, ErrInvalid and
// ErrNotSent), headers are application properties with string values,
// the body is the message body. On an entity that requires sessions
// Message.Key is the SessionId and is required (capability.Topic.KeyRequired;
// the portable layer refuses a message without one before sending);
// elsewhere the key travels in the application property "wary-key".
// Headers are validated before anything is sent (the SDK reports a
// property that is not valid UTF-8 as a lost connection). A message whose
// encoding exceeds the entity's limit is ErrTooLarge, nothing sent;
// capability.Topic.MaxMessageSize keeps 2 KiB of the limit for the encoding.
// A batch goes out as few SDK batches as the limit allows; each is
// accepted or refused whole.
//
// Duplicate detection: on an entity with duplicate detection the service
// drops, silently, a message whose MessageId it saw within the window
// (capability.Topic.DedupWindow, scope the entity).
//
// Sessions: a subscription on an entity that requires sessions holds up to
// MaxSessions sessions at once (AcceptNextSession, default 8), so one
// consumer serves many sessions and several consumers share them; the
// service gives each session to one receiver at a time. Within a session
// the driver receives one message at a time and hands out the next only
// after the previous one is settled (HeadOfLine, order per session). It
// never receives in batches there: the SDK can release part of a batch,
// and those messages come back behind later ones (measured on azservicebus
// v1.11, and described by the SDK's maintainers for the service). The
// session lock is renewed while the session is held, so a delivery stays
// with its consumer until it is settled or the consumer goes away
// (LockTimeout 0): a consumer that dies loses the session when its lock
// expires (the entity's lock duration), and another consumer takes the
// session with its unsettled message first. A session with no message
// for SessionIdle is released, so other sessions get a turn.
//
// A held session is given up as lost when a call on it reports that
// another receiver holds it (session-cannot-be-locked), or when renewals
// have failed until its lock has ended (the accept's return or the start
// of the last successful renewal, plus the lock duration, by this
// client's clock). The SDK treats a lost session lock as recoverable and
// retries it (it re-attaches the session's link), so after a lost
// connection its calls can keep running out of time without a definite
// answer; without this rule a consumer would hold such sessions, and the
// messages it handed out, indefinitely. Settling a delivery of a lost
// session reports ErrLockLost at once, a settle in progress is stopped,
// and the service redelivers the message to the session's next holder.
//
// Without sessions: peek-lock with the entity's lock duration
// (capability.Subscription.LockTimeout); an unsettled delivery returns when its lock
// expires, counted. ExtendLock renews the lock (RenewMessageLock) now and
// again every third of the lock duration until the requested time has
// passed or the delivery is settled (the service renews by its lock
// duration, not by an arbitrary one).
//
// Nack: without a delay, Abandon (the service counts the delivery and
// redelivers at once; in a session, first). On a queue without sessions a
// delay is honoured (NackDelay) by scheduling a copy at now+delay
// (ScheduleMessages) and then completing the original: the copy has a
// fresh MessageId (duplicate detection would drop the original's), and
// carries the original ID in "wary-id" and the deliveries so far in
// "wary-attempts", because a scheduled copy's DeliveryCount starts at 1;
// Message.ID and the Attempt the driver reports continue across the copy.
// A Nack whose attempts reach MaxDeliveryCount dead-letters instead, with
// reason MaxDeliveryCountExceeded, as the service would. A crash between
// the two steps delivers the message twice, never zero times. A delayed
// Nack after the lock has ended (by this client's clock, from receipt or
// the last renewal plus LockDuration) schedules nothing and returns
// ErrLockLost: the service redelivers the original already, and a copy
// would be a second delivery. When the lock ended by the service's clock
// but not yet by this client's (a delivery that reached it late), the
// original's complete reports the lock lost and the copy just scheduled
// is cancelled (CancelScheduledMessages) before ErrLockLost is returned. Topic
// subscriptions and sessions do not delay (NackDelay false): a copy sent
// to a topic reaches every subscription, and a copy in a session goes
// behind the session's later messages.
//
// Delivery limit: native (MaxDeliveryCount); past it the service moves the
// message to the dead-letter queue with reason MaxDeliveryCountExceeded.
// DeadLetter(reason) dead-letters with DeadLetterReason = reason; a
// subscription on the dead-letter queue (OpenDeadLetters, or
// broker.OpenDeadLetters on the consumer's own URL) reports it in the header
// wary-dead-letter-reason. Attempt is DeliveryCount (plus "wary-attempts"
// on a copy).
//
// Peek: a subscription without sessions (a dead-letter sub-queue among
// them) implements broker.Subscription.Peek with PeekMessages: messages
// are shown without a lock and their DeliveryCount stays as it is, which
// is how `wary dlq list` reads dead letters.
//
// Trusted headers: "wary-id" and "wary-attempts" are read only on a copy
// that Nack scheduled (the service stamps its ScheduledEnqueueTime) or on a
// message read from a dead-letter queue; the dead-letter reason only on a
// message read from a dead-letter queue (the service keeps it in an
// application property that any producer can set). Every other reserved
// property (wary-...) that another producer set is dropped on receipt.
//
// Redelivery horizon: the entity's default time to live (a message cannot
// live longer; a delayed copy expires when its original would have);
// capability.HorizonUnbounded when messages never expire (the service's
// default), capability.HorizonUnknown when declared without one.
//
// Settle calls are bounded by broker.SubscriptionOptions.SettleTimeout
// (this driver's default: DefaultSettleTimeout, 10s): after a session
// lock is lost the SDK retries a settle through the old receiver until its
// context ends. Service Bus settles by lock token, one message per call, so
// many acks at once with broker.AckAll (as Run groups the acks of
// concurrent handlers, and package idem those of a grouped transaction,
// idem.Options.Batch) are still one call each; each delivery's outcome is
// reported alone.
//
// # As targets
//
// Topic.As: **azservicebus.Sender, **azservicebus.Client.
// Subscription.As: **azservicebus.Client, and without sessions
// **azservicebus.Receiver. Message.As on received messages:
// **azservicebus.ReceivedMessage. ErrorAs: **azservicebus.Error,
// **amqp.Error, **amqp.LinkError, **amqp.ConnError, **amqp.SessionError
// (github.com/Azure/go-amqp).
//
// # Errors
//
// The SDK maps only the administration API's 404 to CodeNotFound; link and
// settle failures arrive as AMQP conditions, which the driver classifies:
// amqp:not-found is ErrNotFound; com.microsoft:message-lock-lost and
// session-lock-lost (and settling a delivery twice) are ErrLockLost;
// com.microsoft:session-cannot-be-locked (from an accept; from a call on a
// held session it is ErrLockLost), server-busy, timeouts and lost
// connections are retryable (ErrUnavailable); amqp:unauthorized-access is
// ErrPermission; amqp:link:message-size-exceeded is ErrTooLarge;
// amqp:not-allowed and invalid-field are ErrInvalid. A failed send after
// the message was written is reported as maybe sent.
package servicebus
