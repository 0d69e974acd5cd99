package dev.spillway.testing;

import org.testcontainers.utility.DockerImageName;

/** Every container image the tests use, pinned in one place. */
public final class Images {
  private Images() {}

  public static final DockerImageName POSTGRES = DockerImageName.parse("postgres:15.10");
  public static final DockerImageName KAFKA = DockerImageName.parse("apache/kafka:4.1.1");
}
