package dev.spillway.testing;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.kafka.streams.Topology;

/**
 * Compares a topology's {@code describe()} with its committed file under {@code topology/}. With
 * {@code -Dspillway.topology.update=true} the file is rewritten instead, to review in the diff.
 */
public final class TopologyGolden {
  public static final Path DIRECTORY = Path.of("topology");
  private static final String UPDATE = "spillway.topology.update";

  private TopologyGolden() {}

  public static void assertMatches(Topology topology, String name) {
    assertMatches(topology, DIRECTORY.resolve(name + ".txt"));
  }

  public static void assertMatches(Topology topology, Path file) {
    String actual = normalize(topology.describe().toString());
    try {
      if (Boolean.getBoolean(UPDATE)) {
        Files.createDirectories(file.toAbsolutePath().getParent());
        Files.writeString(file, actual, StandardCharsets.UTF_8);
        return;
      }
      assertThat(file)
          .as("%s is missing; create it with mvn verify -D%s=true", file, UPDATE)
          .exists();
      String expected = Files.readString(file, StandardCharsets.UTF_8);
      assertThat(actual)
          .as(
              "The topology differs from %s; if the change is intended, regenerate it with"
                  + " mvn verify -D%s=true and review the diff",
              file, UPDATE)
          .isEqualTo(expected);
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private static String normalize(String description) {
    return description.replace("\r\n", "\n").strip() + "\n";
  }
}
