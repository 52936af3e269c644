-- The caller's own SQL (Store.sql, `eventckpt sql`) runs inside this function; see
-- eventckpt/journal/postgres/caller_sql.py for the whole rule. SECURITY DEFINER, so the statement runs with
-- its owner's privileges, and the server refuses SET ROLE and SET SESSION AUTHORIZATION (set_config()
-- included) inside it: the statement cannot take back privileges the session has. RETURN QUERY EXECUTE
-- opens exactly one statement that returns rows.
CREATE FUNCTION eventckpt.read_only_sql(statement text) RETURNS SETOF record
    LANGUAGE plpgsql VOLATILE SECURITY DEFINER SET search_path = eventckpt, public, pg_temp
    AS $$ BEGIN RETURN QUERY EXECUTE statement; END $$;
-- It reads with its owner's rights: only the owner (and superusers) may run it; grant EXECUTE to others.
REVOKE ALL ON FUNCTION eventckpt.read_only_sql(text) FROM PUBLIC;
-- Created by a superuser, it belongs to the predefined role pg_read_all_data (PostgreSQL 14+): it may read
-- every table and nothing more (no COPY TO PROGRAM, pg_read_file, lo_import, pg_reload_conf, ...). Where
-- that role does not exist, a superuser's function would keep every power: there is none (and a
-- superuser's SQL is refused). Created by another role, it runs with that role's own privileges.
DO $$
BEGIN
    IF (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        IF to_regrole('pg_read_all_data') IS NULL THEN
            DROP FUNCTION eventckpt.read_only_sql(text);
        ELSE
            ALTER FUNCTION eventckpt.read_only_sql(text) OWNER TO pg_read_all_data;
        END IF;
    END IF;
END $$;

UPDATE eventckpt.store_info SET schema_version = 5;
