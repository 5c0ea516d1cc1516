-- `acp-sidecar sessions --watch` (docs/fleet.md): every change to a session
-- or its turns notifies acp_sidecar_sessions with the session's id and
-- nothing else; a watcher reads the data after. PostgreSQL delivers a
-- notification at commit, once per id and transaction.

CREATE FUNCTION acp_sidecar.notify_session() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
	IF TG_OP = 'DELETE' THEN
		PERFORM pg_notify('acp_sidecar_sessions', OLD.client_id);
		RETURN OLD;
	END IF;
	PERFORM pg_notify('acp_sidecar_sessions', NEW.client_id);
	RETURN NEW;
END
$$;

CREATE TRIGGER sessions_notify AFTER INSERT OR UPDATE OR DELETE ON acp_sidecar.sessions
	FOR EACH ROW EXECUTE FUNCTION acp_sidecar.notify_session();
CREATE TRIGGER turns_notify AFTER INSERT OR UPDATE OR DELETE ON acp_sidecar.turns
	FOR EACH ROW EXECUTE FUNCTION acp_sidecar.notify_session();
