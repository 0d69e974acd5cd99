package dev.spillway.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.UncheckedIOException;
import java.nio.file.AccessDeniedException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.NotDirectoryException;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The one sentence a failure is told in. */
class ErrorHandlerTest {

  @Test
  void should_word_a_file_system_failure_as_a_sentence_naming_the_file(@TempDir Path dir)
      throws Exception {
    Path file = Files.writeString(dir.resolve("spillway.yml"), "");
    assertThat(ErrorHandler.sentence(new FileAlreadyExistsException(file.toString())))
        .isEqualTo("Cannot create " + file + ": a file of that name exists.");
    assertThat(ErrorHandler.sentence(new FileAlreadyExistsException(dir.toString())))
        .isEqualTo("Cannot create " + dir + ": a directory of that name exists.");
    assertThat(ErrorHandler.sentence(new AccessDeniedException("/srv/spillway/runtime.json")))
        .isEqualTo("Permission denied: /srv/spillway/runtime.json.");
    assertThat(ErrorHandler.sentence(new NotDirectoryException("/srv/spillway")))
        .isEqualTo("Not a directory: /srv/spillway.");
  }

  @Test
  void should_tell_the_cause_rather_than_a_wrapper_repeating_its_class_and_message() {
    assertThat(
            ErrorHandler.sentence(
                new UncheckedIOException(new NoSuchFileException("/srv/lfk.yml"))))
        .isEqualTo("No such file or directory: /srv/lfk.yml.");
    assertThat(
            ErrorHandler.sentence(
                new IllegalStateException(
                    "The definitions were not written", new AccessDeniedException("/srv/x"))))
        .as("a wrapper's own sentence")
        .isEqualTo("The definitions were not written.");
  }

  @Test
  void should_say_why_kafka_could_not_build_a_client() {
    assertThat(
            ErrorHandler.sentence(
                new java.util.concurrent.CompletionException(
                    new org.apache.kafka.common.KafkaException(
                        "Failed to create new KafkaAdminClient",
                        new org.apache.kafka.common.config.ConfigException(
                            "No resolvable bootstrap urls given in bootstrap.servers")))))
        .isEqualTo(
            "A Kafka client could not be created (check kafka.bootstrap-servers and"
                + " kafka.properties): No resolvable bootstrap urls given in bootstrap.servers.");
  }

  @Test
  void should_not_take_a_client_failing_to_close_for_one_never_built() {
    assertThat(
            ErrorHandler.sentence(
                new org.apache.kafka.common.KafkaException(
                    "Failed to close kafka producer", new IllegalStateException("flush failed"))))
        .isEqualTo("Failed to close kafka producer.");
  }
}
