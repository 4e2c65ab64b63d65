-- Version 7: free-form notes on records.
CREATE TABLE notes (
    id         bigserial PRIMARY KEY,
    record_id  bigint      NOT NULL REFERENCES records (id) ON DELETE CASCADE,
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
