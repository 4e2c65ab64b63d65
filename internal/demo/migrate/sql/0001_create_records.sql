-- Version 1: the records table the demo app reads and writes.
CREATE TABLE records (
    id         bigserial PRIMARY KEY,
    body       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
