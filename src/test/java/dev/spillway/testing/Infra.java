package dev.spillway.testing;

import dev.spillway.jdbc.DatabaseEndpoint;
import dev.spillway.jdbc.Databases;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import java.util.ArrayList;
import java.util.List;

/**
 * A real Kafka broker and a real PostgreSQL server (logical WAL) shared by the integration tests of
 * one JVM. Tests isolate themselves by schema, database and topic names, never by restarting it.
 */
public interface Infra {
  String bootstrapServers();

  /** An endpoint for the named database, created on first use, as a superuser. */
  DatabaseEndpoint database(String name);

  /** Pools for the named databases; close them after the test. */
  default Databases databases(String... names) {
    List<DatabaseEndpoint> endpoints = new ArrayList<>();
    for (String n : names) {
      endpoints.add(database(n));
    }
    return new Databases(endpoints, new SimpleMeterRegistry());
  }
}
