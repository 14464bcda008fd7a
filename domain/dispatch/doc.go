// Package dispatch offers admins' orders to registered masters one at a
// time and takes them back when nobody answers.
//
//	order:  SEARCHING ──accept──► ASSIGNED ──/done, master's Done──► DONE ──autoclose──► CLOSED
//	          ▲  │                  │  │
//	          │  └─────/cancel──────┴──┼──► CANCELLED
//	          └──master's Can't do it──┘
//
//	ASSIGNED carries the master's steps, marks set once each: en_route_at
//	(On my way), arrived_at (Arrived).
//
//	offer:  SENT ──Details──► VIEWED
//	          │                 │
//	          ├─────────────────┴──► ACCEPTED | DECLINED | EXPIRED | WITHDRAWN (order cancelled, master blocked)
//
// Distribution picks, for a SEARCHING order with no open offer, among the
// matching masters (city, district, skill; active; not blocked for
// commission; no open offer; not offered this order in this round) the one
// best ranked by their customers' ratings (RankOf) and, within a rank, idle
// longest, and offers it with expires_at = now + OFFER_SLA. After two rounds the order is
// reported to admins as unassignable and waits.
//
// An order's customer address, name and phone are shown only to the master
// who accepted it (and to admins), never in an offer; the visit's date and
// window are city-local as typed. The assigned master's buttons (steps.go)
// are each one conditional statement naming the order's master and state,
// so only that master, and only once, moves it. A master who gives an order
// back keeps their ACCEPTED offer of it, and distribution passes over
// masters holding one: they are never offered it again.
//
// The order's customer (customer.go) is whoever opens its link first
// (JoinOrder; ReissueLink revokes it): each change of the order tells them
// through the story that tells the masters and the admins, in the change's
// transaction; a reply to the bot's message about the order is relayed to
// its other side until Done (Relay), and after it the customer's reply is
// the comment on their rating; Late tells of a master not arrived by the
// end of the visit window (late.go). Neither side learns the other's
// Telegram identity. Ratings (ratings.go) rank the candidates.
//
// The expired-offers watchdog is the seed's one statement; it runs on every
// WATCHDOG_INTERVAL tick as the guarantee and, on every replica, at the
// earliest expires_at that replica knows of (re-armed through NOTIFY on
// dispatch_offers), so an offer expires well under a second late. Accepting is
// one conditional UPDATE that checks the master, the state, expires_at and
// that the master is not blocked (their row held FOR SHARE), in the same
// transaction as the order's SEARCHING → ASSIGNED, so a late, repeated or
// foreign press, or a blocked master's, cannot assign anything. Blocking a
// master for commission withdraws their open offers in the same
// transaction, and their orders go on as after an expiry. The database
// enforces one open offer per order and per master with partial unique
// indexes.
//
// Storage: two ports (service.go), one per aggregate: Orders, the orders
// and their offers, implemented by storage.Orders (storage/orders.go and
// storage/offers.go), and Masters, registration and commission,
// implemented by storage.Masters (storage/masters.go). A distribution
// step's rules live in policy.go: storage reads the facts and writes what
// it decides.
package dispatch
