package dispatch

import (
	"context"
	"time"
)

// lateBatch bounds the orders one run of the late check reads.
const lateBatch = 500

// Late tells the admins, once per order, of each assigned master who has
// not pressed Arrived by the end of the order's visit window, and the
// customer that their master is running late: the job. The window is the
// city's local time, as the admin wrote it; its end is read on the
// service's clock.
func (s *Service) Late(ctx context.Context) (int, error) {
	orders, err := s.deps.Orders.Unarrived(ctx, lateBatch)
	if err != nil {
		return 0, err
	}
	now := s.deps.Clock.Now()
	told := 0
	for _, o := range orders {
		if end := s.WindowEnd(o); end.IsZero() || now.Before(end) {
			continue
		}
		st := s.newStory()
		_, ok, err := s.deps.Orders.MarkLate(ctx, o.ID, st.tell(func(c Changed) {
			m, _ := masterOf(c, c.Order.MasterID)
			st.event(Event{Kind: EventMasterLate, OrderID: c.Order.ID, MasterID: c.Order.MasterID, Master: known(m)})
			st.customer(c, CustomerLate)
		}))
		if err != nil {
			return told, err
		}
		if ok {
			st.logged()
			told++
		}
	}
	return told, nil
}

// WindowEnd is the end of o's visit window in its city's zone (zero
// without a window).
func (s *Service) WindowEnd(o Order) time.Time {
	if !o.Visit.Given() || !o.Visit.Window() {
		return time.Time{}
	}
	zone := s.cfg.Calendar.Zone(o.City)
	y, m, d := o.Visit.Date.Date()
	return OnClock(y, m, d, o.Visit.To, zone)
}
