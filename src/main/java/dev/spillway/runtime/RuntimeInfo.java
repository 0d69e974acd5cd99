package dev.spillway.runtime;

import java.util.Map;

/**
 * Where a running Spillway process can be reached, as published in its working directory.
 *
 * @param pid the process
 * @param httpPort metrics and status API
 * @param bootstrapServers the Kafka it uses (the embedded broker's address when embedded)
 * @param databases the embedded databases, Spillway database name → JDBC URL; none when the
 *     databases are configured, whose URLs may carry a password and are in the configuration
 */
public record RuntimeInfo(
    long pid, int httpPort, String bootstrapServers, Map<String, String> databases) {}
