package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.apache.avro.util.ClassSecurityValidator;
import org.junit.jupiter.api.Test;

/** Events decode in a JVM where something else touched Avro before Spillway did. */
class AvroTrustTest {
  @Test
  void should_decode_events_when_avro_was_first_used_by_something_else() throws Exception {
    // A fresh JVM: in this one, Spillway's classes were most likely touched already.
    Process p =
        new ProcessBuilder(
                Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                "-cp",
                System.getProperty("java.class.path"),
                AvroFirst.class.getName())
            .redirectErrorStream(true)
            .start();
    String output = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
    assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();

    assertThat(output).contains("decoded row {id=7}");
    assertThat(p.exitValue()).as(output).isZero();
  }

  /** Uses Avro's class check first, as a handler class built on Avro would, then Spillway's. */
  public static final class AvroFirst {
    public static void main(String[] args) throws IOException {
      ClassSecurityValidator.getGlobal();
      BufferEvent e =
          new BufferEvent(
              "main", new TableName("public", "events"), Map.of("id", 7L), 1L, 2L, 3L, 4L);
      BufferEvent back = EventSerdes.decodeBufferEvent(EventSerdes.encode(e));
      System.out.println("decoded row " + back.row());
    }
  }
}
