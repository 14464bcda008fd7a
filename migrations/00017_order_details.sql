-- +goose Up
-- What an order carries for the job (README "Dispatch"). The customer's
-- address, name and phone are personal data: only the assigned master sees
-- them (admins, who typed them, too), and the prune job clears them
-- RETAIN_ORDER_CONTACTS after the order is CLOSED or CANCELLED
-- (contacts_pruned_at marks a cleared order). The visit's date and time
-- window are city-local, exactly as the admin typed them: no zone.
ALTER TABLE orders
    ADD COLUMN address            text CHECK (address <> '' AND length(address) <= 300),
    ADD COLUMN customer_name      text CHECK (customer_name <> '' AND length(customer_name) <= 100),
    ADD COLUMN customer_phone     text CHECK (customer_phone <> '' AND length(customer_phone) <= 40),
    ADD COLUMN visit_date         date,
    ADD COLUMN visit_from         time,
    ADD COLUMN visit_to           time,
    -- the assigned master's steps (cleared when they give the order back)
    ADD COLUMN en_route_at        timestamptz,
    ADD COLUMN arrived_at         timestamptz,
    -- photos of the finished work the master sent on to the admin chat
    ADD COLUMN photos             int NOT NULL DEFAULT 0 CHECK (photos >= 0),
    ADD COLUMN contacts_pruned_at timestamptz,
    ADD CONSTRAINT orders_visit_window CHECK ((visit_from IS NULL) = (visit_to IS NULL) AND visit_from < visit_to),
    ADD CONSTRAINT orders_visit_day CHECK (visit_from IS NULL OR visit_date IS NOT NULL),
    ADD CONSTRAINT orders_steps CHECK (arrived_at IS NULL OR en_route_at IS NOT NULL);

-- Ended orders whose customer data the prune job has still to clear,
-- walked by the moment they ended.
CREATE INDEX orders_contacts ON orders (COALESCE(closed_at, cancelled_at))
    WHERE state IN ('CLOSED', 'CANCELLED') AND contacts_pruned_at IS NULL;

-- +goose Down
DROP INDEX orders_contacts;
ALTER TABLE orders
    DROP CONSTRAINT orders_steps,
    DROP CONSTRAINT orders_visit_day,
    DROP CONSTRAINT orders_visit_window,
    DROP COLUMN contacts_pruned_at,
    DROP COLUMN photos,
    DROP COLUMN arrived_at,
    DROP COLUMN en_route_at,
    DROP COLUMN visit_to,
    DROP COLUMN visit_from,
    DROP COLUMN visit_date,
    DROP COLUMN customer_phone,
    DROP COLUMN customer_name,
    DROP COLUMN address;
