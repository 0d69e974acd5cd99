package dev.spillway.event;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.apache.avro.util.ClassSecurityValidator;
import org.apache.avro.util.ClassSecurityValidator.ClassSecurityPredicate;
import org.junit.jupiter.api.Test;

/**
 * Events decode in a JVM where something else used Avro before Spillway did, and Spillway leaves
 * that user's own class checks as they were. Each case runs in a fresh JVM: in this one, Spillway's
 * classes were most likely touched already.
 */
class AvroTrustTest {
  @Test
  void should_decode_events_when_avro_was_first_used_by_something_else() throws Exception {
    String printed = run(AvroFirst.class);

    assertThat(printed).contains("decoded row {id=7}").doesNotContain("Exception");
  }

  @Test
  void should_leave_what_an_application_does_with_classes_it_does_not_trust() throws Exception {
    String printed = run(WarningApplication.class);

    assertThat(printed)
        .contains("decoded row {id=7}")
        .contains("warned of " + UUID.class.getName())
        .doesNotContain("Exception");
  }

  /** Uses Avro's class check first, as a handler class built on Avro would, then Spillway's. */
  public static final class AvroFirst {
    public static void main(String[] args) {
      ClassSecurityValidator.getGlobal();
      decodeOne();
    }
  }

  /** An application whose check warns of a class it does not trust rather than refusing it. */
  public static final class WarningApplication {
    public static void main(String[] args) {
      ClassSecurityValidator.setGlobal(
          new ClassSecurityPredicate() {
            @Override
            public boolean isTrusted(Class<?> c) {
              return ClassSecurityValidator.DEFAULT.isTrusted(c);
            }

            @Override
            public void forbiddenClass(String className) {
              System.out.println("warned of " + className);
            }
          });
      decodeOne();
      ClassSecurityValidator.validate(UUID.class);
    }
  }

  private static void decodeOne() {
    BufferEvent e =
        new BufferEvent(
            "main", new TableName("public", "events"), Map.of("id", 7L), 1L, 2L, 3L, 4L);
    System.out.println("decoded row " + EventSerdes.decodeBufferEvent(EventSerdes.encode(e)).row());
  }

  /** What {@code main} printed, once it ended with exit code 0 within a minute. */
  private static String run(Class<?> main) throws Exception {
    Path output = Files.createTempFile("avro-trust", ".log");
    try {
      Process p =
          new ProcessBuilder(
                  Path.of(System.getProperty("java.home"), "bin", "java").toString(),
                  "-cp",
                  System.getProperty("java.class.path"),
                  main.getName())
              .redirectErrorStream(true)
              .redirectOutput(output.toFile())
              .start();
      if (!p.waitFor(60, TimeUnit.SECONDS)) {
        p.destroyForcibly();
      }
      String printed = Files.readString(output);
      assertThat(p.isAlive()).as("ended within a minute").isFalse();
      assertThat(p.exitValue()).as(printed).isZero();
      return printed;
    } finally {
      Files.delete(output);
    }
  }
}
