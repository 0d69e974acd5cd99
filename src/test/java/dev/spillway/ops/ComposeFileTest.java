package dev.spillway.ops;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.Reader;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.yaml.snakeyaml.Yaml;

/** The compose file, read as compose would (no engine here runs it). */
class ComposeFileTest {
  @Test
  @SuppressWarnings("unchecked")
  void should_start_spillway_once_its_broker_and_database_answer() throws Exception {
    Map<String, Object> services;
    try (Reader in = Files.newBufferedReader(Path.of("docker", "compose.yaml"))) {
      services = (Map<String, Object>) new Yaml().<Map<String, Object>>load(in).get("services");
    }
    Map<String, Object> spillway = (Map<String, Object>) services.get("spillway");

    // Started as soon as the containers are, it would find PostgreSQL still running its init.
    assertThat((Map<String, Object>) spillway.get("depends_on"))
        .containsOnlyKeys("kafka", "postgres")
        .allSatisfy(
            (name, how) ->
                assertThat((Map<String, Object>) how)
                    .containsEntry("condition", "service_healthy"));
    for (String name : List.of("kafka", "postgres")) {
      Map<String, Object> service = (Map<String, Object>) services.get(name);
      assertThat((Map<String, Object>) service.get("healthcheck")).as(name).containsKey("test");
    }
    // Over TCP: the server the image runs its init script on takes connections on its socket
    // alone, so a check through the socket would pass before the script has run.
    Map<String, Object> postgres = (Map<String, Object>) services.get("postgres");
    assertThat((List<String>) ((Map<String, Object>) postgres.get("healthcheck")).get("test"))
        .containsSequence("pg_isready", "-h", "127.0.0.1");
  }
}
