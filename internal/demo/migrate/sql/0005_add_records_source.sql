-- Version 5: where a record came from (nullable).
ALTER TABLE records ADD COLUMN source text;
