-- Runs once when the compose PostgreSQL starts with an empty volume.
CREATE ROLE spillway LOGIN REPLICATION PASSWORD 'spillway';
GRANT ALL ON DATABASE app TO spillway;
ALTER DATABASE app OWNER TO spillway;
-- The health indicators read other sessions' statistics.
GRANT pg_monitor TO spillway;
