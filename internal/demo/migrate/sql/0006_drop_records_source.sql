-- Version 6: records.source turned out to be unused; drop it.
-- destructive: drops column records.source
ALTER TABLE records DROP COLUMN source;
