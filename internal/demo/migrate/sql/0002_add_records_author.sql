-- Version 2: who wrote a record (nullable, so older binaries keep inserting).
ALTER TABLE records ADD COLUMN author text;
