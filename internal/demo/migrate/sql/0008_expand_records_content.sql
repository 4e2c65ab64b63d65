-- Version 8: records.body becomes records.content, without downtime. This is the expand half of an
-- expand/contract pair: it adds content, copies every body into it, and keeps both columns in step while
-- versions that write only body (7 and older) and versions that write only content (8 and newer) serve side by
-- side. The contract half (demo contract, run by premigrate's migration.contract once no older pod is left)
-- drops body and the trigger. Nothing here destroys data.
ALTER TABLE records ADD COLUMN content text;
UPDATE records SET content = body;
ALTER TABLE records ALTER COLUMN body DROP NOT NULL;
CREATE FUNCTION records_body_content_sync() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        NEW.content := coalesce(NEW.content, NEW.body);
        NEW.body := coalesce(NEW.body, NEW.content);
    ELSIF NEW.content IS DISTINCT FROM OLD.content THEN
        NEW.body := NEW.content;
    ELSIF NEW.body IS DISTINCT FROM OLD.body THEN
        NEW.content := NEW.body;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER records_body_content_sync BEFORE INSERT OR UPDATE ON records
    FOR EACH ROW EXECUTE FUNCTION records_body_content_sync();
