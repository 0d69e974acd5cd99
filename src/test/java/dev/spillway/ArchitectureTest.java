package dev.spillway;

import static com.tngtech.archunit.lang.syntax.ArchRuleDefinition.noClasses;

import com.tngtech.archunit.core.domain.JavaClasses;
import com.tngtech.archunit.core.importer.ClassFileImporter;
import com.tngtech.archunit.core.importer.ImportOption;
import org.junit.jupiter.api.Test;

/** Shared stages never depend on a pipeline; pipelines depend on the shared stages. */
class ArchitectureTest {
  private static final JavaClasses MAIN =
      new ClassFileImporter()
          .withImportOption(ImportOption.Predefined.DO_NOT_INCLUDE_TESTS)
          .importPackages("dev.spillway");

  @Test
  void should_keep_shared_stages_free_of_pipeline_code() {
    noClasses()
        .that()
        .resideInAnyPackage(
            "dev.spillway.config..",
            "dev.spillway.capture..",
            "dev.spillway.event..",
            "dev.spillway.streams..",
            "dev.spillway.sink..",
            "dev.spillway.health..",
            "dev.spillway.jdbc..",
            "dev.spillway.ops..",
            "dev.spillway.support..")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage(
            "dev.spillway.lfk..",
            "dev.spillway.buffers..",
            "dev.spillway.operations..",
            "dev.spillway.scheduler..",
            "dev.spillway.cli..",
            "dev.spillway.bench..")
        .allowEmptyShould(true)
        .check(MAIN);
  }

  @Test
  void should_keep_capture_independent_of_the_runtime_wiring() {
    noClasses()
        .that()
        .resideInAnyPackage("dev.spillway.capture..", "dev.spillway.event..", "dev.spillway.jdbc..")
        .should()
        .dependOnClassesThat()
        .resideInAnyPackage("dev.spillway.runtime..", "dev.spillway.config..")
        .check(MAIN);
  }

  @Test
  void should_keep_the_support_helpers_free_of_every_other_part() {
    noClasses()
        .that()
        .resideInAPackage("dev.spillway.support..")
        .should()
        .dependOnClassesThat()
        .resideOutsideOfPackages("dev.spillway.support..", "java..", "javax..")
        .check(MAIN);
  }
}
