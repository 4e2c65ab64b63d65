-- Version 3: index on records.created_at.
CREATE INDEX records_created_at_idx ON records (created_at);
