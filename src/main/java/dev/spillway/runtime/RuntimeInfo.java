package dev.spillway.runtime;

import java.util.Map;

/**
 * Where a running Spillway process can be reached, as published in its working directory.
 *
 * @param pid the process
 * @param httpPort metrics and status API
 * @param bootstrapServers the Kafka it uses (the embedded broker's address when embedded)
 * @param databases Spillway database name → JDBC URL
 */
public record RuntimeInfo(
    long pid, int httpPort, String bootstrapServers, Map<String, String> databases) {}
