-- Version 4: tags attached to records.
CREATE TABLE tags (
    id        bigserial PRIMARY KEY,
    record_id bigint NOT NULL REFERENCES records (id) ON DELETE CASCADE,
    name      text   NOT NULL,
    UNIQUE (record_id, name)
);
CREATE INDEX tags_name_idx ON tags (name);
