package io.disaggusage.extproc.usage;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.disaggusage.extproc.usage.UsageFields.Field;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.MethodSource;

/**
 * The table of behaviour.md "Every usage member by rule" is the rule's: the documented rows are
 * {@link UsageFields#ALL}, and for every listed count a generated case checks that the value written
 * comes from the leg the table names, and that a value that cannot be true never goes out.
 */
class UsageFieldsTest {
  private static final JsonUsageRewriter REWRITER = new JsonUsageRewriter(UsageDocument.newFactory(1 << 20), 64 * 1024);
  private static final ObjectMapper MAPPER = new ObjectMapper();
  private static final Map<String, ApiShape> SHAPES =
      Map.of(UsageFields.CHAT, ApiShapes.CHAT, UsageFields.RESPONSES, ApiShapes.RESPONSES, UsageFields.MESSAGES, ApiShapes.MESSAGES);

  static Path root() {
    return Path.of(System.getProperty("project.root", "..")).toAbsolutePath().normalize();
  }

  /** The rows of the documented table: API, member, leg. */
  static List<List<String>> documentedRows() throws Exception {
    String doc = Files.readString(root().resolve("docs/behaviour.md"));
    int start = doc.indexOf("### Every usage member by rule");
    assertThat(start).as("the table's section").isNotNegative();
    int end = doc.indexOf("\n### ", start + 1);
    List<List<String>> rows = new ArrayList<>();
    for (String line : doc.substring(start, end).split("\n")) {
      String[] cells = line.split("\\|");
      if (cells.length >= 4 && SHAPES.containsKey(cells[1].trim())) {
        rows.add(List.of(cells[1].trim(), cells[2].trim().replace("`", ""), cells[3].trim()));
      }
    }
    return rows;
  }

  @Test
  void theDocumentedTableIsTheRulesList() throws Exception {
    List<List<String>> listed = UsageFields.ALL.stream()
        .map(f -> List.of(f.api(), f.member(), f.from().label()))
        .toList();
    assertThat(documentedRows()).containsExactlyElementsOf(listed);
  }

  static Stream<Field> counts() {
    return UsageFields.ALL.stream().filter(Field::count);
  }

  /**
   * One case per listed count: the context usage states 40 prompt tokens and 3 for every listed
   * detail; the generation usage 50 prompt tokens, 5 completion tokens and 4 for every listed detail.
   * The written value must be the named leg's.
   */
  @ParameterizedTest(name = "{0}")
  @MethodSource("counts")
  void everyListedCountComesFromItsLeg(Field field) throws Exception {
    JsonNode usage = written(field, "4");
    JsonNode value = at(usage, field.member());
    assertThat(value).as(field.member()).isNotNull();
    assertThat(value.isIntegralNumber()).as(field.member()).isTrue();
    assertThat(value.longValue()).as(field.member() + " from " + field.from()).isEqualTo(expected(field));
  }

  /** The same cases with the generation's value of the member something that cannot be true. */
  @ParameterizedTest(name = "{0}")
  @MethodSource("counts")
  void noListedCountGoesOutImpossible(Field field) throws Exception {
    for (String impossible : new String[] {"-4", "4.5", "\"4\"", "true"}) {
      JsonNode usage = written(field, impossible);
      usage.forEach(member -> {
        if (member.isNumber()) {
          assertThat(member.isIntegralNumber() && member.longValue() >= 0).as(field + " " + impossible).isTrue();
        }
      });
      JsonNode value = at(usage, field.member());
      assertThat(value.isIntegralNumber() && value.longValue() >= 0).as(field + " " + impossible).isTrue();
    }
  }

  /**
   * The value the table says: the context's (3, or 40 for the prompt), the generation's own (the
   * case's 4), or computed from the context's prompt split and the generation's completion (5).
   */
  private static long expected(Field field) {
    String m = field.member();
    return switch (field.from()) {
      case CONTEXT -> m.equals("prompt_tokens") || m.equals("input_tokens") ? 40 : 3;
      case GENERATION -> 4;
      case COMPUTED -> field.api().equals(UsageFields.MESSAGES) ? 40 - 3 - 3 : 40 + 5;
    };
  }

  /** The generation usage written for a case, {@code value} standing for the member the case is about. */
  private static JsonNode written(Field field, String value) throws Exception {
    ApiShape shape = SHAPES.get(field.api());
    String c;
    String g;
    if (field.api().equals(UsageFields.MESSAGES)) {
      c = "{\"input_tokens\":34,\"output_tokens\":1,\"cache_read_input_tokens\":3,\"cache_creation_input_tokens\":3}";
      g = object(Map.of("input_tokens", "0", "output_tokens", "5", "cache_read_input_tokens", "40",
          "cache_creation_input_tokens", "4"), field.member(), value);
    } else {
      OpenAiShape names = (OpenAiShape) shape;
      String details = names.promptDetailsMember();
      String outputDetails = names.completionMember() + "_details";
      c = "{\"" + names.promptMember() + "\":40,\"" + names.completionMember() + "\":1,\"" + details + "\":"
          + details(field.api(), details, "3", null, null) + "}";
      g = object(Map.of(
          names.promptMember(), "50",
          names.completionMember(), "5",
          "total_tokens", "55",
          details, details(field.api(), details, "4", field.member(), value),
          outputDetails, details(field.api(), outputDetails, "4", field.member(), value)), field.member(), value);
    }
    byte[] doc = ("{\"usage\":" + g + "}").getBytes(StandardCharsets.UTF_8);
    ContextUsage ctx = JsonUsageRewriterTest.ctx(c);
    JsonUsageRewriter.Result r = REWRITER.rewrite(doc, ctx, shape);
    assertThat(r).as(field + ": " + new String(doc, StandardCharsets.UTF_8)).isInstanceOf(JsonUsageRewriter.Rewritten.class);
    return MAPPER.readTree(((JsonUsageRewriter.Rewritten) r).document()).get("usage");
  }

  /** A details object with every listed count of it at {@code each}, the case's member at {@code value}. */
  private static String details(String api, String object, String each, String member, String value) {
    StringBuilder sb = new StringBuilder("{");
    for (String key : UsageFields.detailCounts(api, object).stream().sorted().toList()) {
      String path = object + "." + key;
      sb.append(sb.length() > 1 ? "," : "").append('"').append(key).append("\":")
          .append(path.equals(member) ? value : each);
    }
    return sb.append('}').toString();
  }

  /** An object of {@code members} (sorted), with the top-level {@code member} set to {@code value}. */
  private static String object(Map<String, String> members, String member, String value) {
    StringBuilder sb = new StringBuilder("{");
    members.keySet().stream().sorted().forEach(k -> sb.append(sb.length() > 1 ? "," : "").append('"').append(k)
        .append("\":").append(k.equals(member) ? value : members.get(k)));
    return sb.append('}').toString();
  }

  private static JsonNode at(JsonNode usage, String path) {
    JsonNode n = usage;
    for (String part : path.split("\\.")) {
      n = n == null ? null : n.get(part);
    }
    return n;
  }
}
