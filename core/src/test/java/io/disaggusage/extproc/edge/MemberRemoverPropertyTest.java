package io.disaggusage.extproc.edge;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.json.JsonReadFeature;
import com.fasterxml.jackson.databind.DeserializationFeature;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.json.JsonMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import io.disaggusage.extproc.edge.JsonDoc.Arr;
import io.disaggusage.extproc.edge.JsonDoc.Member;
import io.disaggusage.extproc.edge.JsonDoc.Obj;
import io.disaggusage.extproc.edge.JsonDoc.Raw;
import io.disaggusage.extproc.edge.JsonDoc.Value;
import io.disaggusage.extproc.edge.JsonDoc.Ws;
import io.disaggusage.extproc.edge.MemberRemoverSpecificationTest.Run;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * Random JSON bodies (seeded, so a failure repeats) with the removed names among ordinary ones, at
 * every depth, spelled with escapes, duplicated: for random chunkings the output parses, equals the
 * input with the members removed as a tree, and differs from the input only by the removed members'
 * bytes, their commas and blanks. Random corruptions of such bodies are rejected exactly when Jackson's
 * blocking parser (with Python's NaN and Infinity) rejects them, for every chunking.
 */
class MemberRemoverPropertyTest {
  private static final long SEED = 0x5eed_ed9eL;
  private static final MemberPaths PATHS = MemberPaths.defaults();
  private static final ObjectMapper MAPPER =
      JsonMapper.builder(JsonFactory.builder().enable(JsonReadFeature.ALLOW_NON_NUMERIC_NUMBERS).build())
          .enable(DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
          .build();

  private static final List<String> NAMES =
      List.of(
          "model", "messages", "a", "stream", "\u00e9t\u00e9", "kv_transfer_params", "disaggregated_params",
          "bootstrap_host", "bootstrap_port", "bootstrap_room", "vllm_xargs", "sampling_params", "extra_args",
          "kv_transfer_param");
  private static final List<String> SCALARS =
      List.of(
          "0", "-1", "12345678901234567890123", "1.5", "-0.0e-7", "2E+3", "true", "false", "null", "NaN",
          "Infinity", "-Infinity", "\"\"", "\"x, } ] \\\" \\\\ \\/ \\b\\f\\n\\r\\t\"", "\"\\u00e9\\ud83d\\ude00 \u00e9\"",
          "\"{\\\"kv_transfer_params\\\":1}\"");
  private static final List<String> BLANKS = List.of("", "", "", " ", "  ", "\n", "\r\n", "\t", " \n  ");

  private final Random random = new Random(SEED);

  @Test
  void randomBodiesLoseExactlyTheRemovedMembers() throws Exception {
    for (int n = 0; n < 1500; n++) {
      Obj doc = object(0, PATHS.root());
      JsonDoc.Rendered rendered = JsonDoc.render(doc, PATHS.root());
      byte[] body = rendered.toBytes();
      Run whole = Run.cut(MemberRemoval.defaults(), body, List.of());
      String context = "body #" + n + ": " + new String(body, StandardCharsets.UTF_8);
      assertThat(whole.rejection()).as(context).isNull();
      assertThat(whole.text()).as(context).isEqualTo(JsonDoc.expected(doc, PATHS.root()));

      JsonNode expectedTree = withoutPaths(MAPPER.readTree(body), PATHS.root());
      assertThat(MAPPER.readTree(whole.output())).as(context).isEqualTo(expectedTree);
      assertOnlyRemovedBytesDiffer(body, whole.output(), rendered, context);

      for (int k = 0; k < 8; k++) {
        List<Integer> cuts = randomCuts(body.length);
        assertThat(Run.cut(MemberRemoval.defaults(), body, cuts).output())
            .as("%s cut at %s", context, cuts)
            .isEqualTo(whole.output());
      }
    }
  }

  @Test
  void corruptedBodiesAreRejectedWhenJacksonRejectsThem() {
    int rejected = 0;
    for (int n = 0; n < 3000; n++) {
      byte[] body = corrupt(JsonDoc.render(object(0, PATHS.root()), PATHS.root()).toBytes());
      if (!validUtf8(body)) {
        continue;
      }
      boolean valid = jacksonReadsOneObject(body);
      rejected += valid ? 0 : 1;
      for (int k = 0; k < 6; k++) {
        List<Integer> cuts = k == 0 ? List.of() : randomCuts(body.length);
        Run run = Run.cut(MemberRemoval.defaults(), body, cuts);
        assertThat(run.rejection() == null)
            .as("body %s cut at %s: rejection %s", new String(body, StandardCharsets.UTF_8), cuts, run.rejection())
            .isEqualTo(valid);
      }
    }
    assertThat(rejected).isGreaterThan(1000);
  }

  // ---------------------------------------------------------------------------------------------
  // Checks

  /** The input as a tree, without the members the paths name (the last duplicate is what a tree keeps). */
  private static JsonNode withoutPaths(JsonNode node, MemberPaths.Node level) {
    if (!(node instanceof ObjectNode object) || level == null) {
      return node;
    }
    List<String> names = new ArrayList<>();
    object.fieldNames().forEachRemaining(names::add);
    for (String name : names) {
      if (level.removedPath(name) != null) {
        object.remove(name);
      } else {
        object.set(name, withoutPaths(object.get(name), level.child(name)));
      }
    }
    return object;
  }

  /**
   * The output is the input without the removed members' spans, minus only commas (one per removed
   * member, one less in an object left empty) and blanks, in order.
   */
  private static void assertOnlyRemovedBytesDiffer(byte[] in, byte[] out, JsonDoc.Rendered rendered, String context) {
    byte[] outside = new byte[in.length];
    int length = 0;
    int next = 0;
    for (long[] span : rendered.removedSpans) {
      while (next < span[0]) {
        outside[length++] = in[next++];
      }
      next = (int) Math.max(next, span[1]);
    }
    while (next < in.length) {
      outside[length++] = in[next++];
    }
    int j = 0;
    for (int i = 0; i < length && j < out.length; i++) {
      if (outside[i] == out[j]) {
        j++;
      }
    }
    assertThat(j).as("%s: the output is in order within what is outside the removed members", context).isEqualTo(out.length);
    int[] dropped = new int[256];
    for (int i = 0; i < length; i++) {
      dropped[outside[i] & 0xff]++;
    }
    for (byte b : out) {
      dropped[b & 0xff]--;
    }
    assertThat(dropped[',']).as("%s: commas dropped", context).isEqualTo(rendered.removedCommas);
    for (int b = 0; b < 256; b++) {
      if (b != ',' && b != ' ' && b != '\n' && b != '\r' && b != '\t') {
        assertThat(dropped[b]).as("%s: bytes %d dropped", context, b).isZero();
      }
    }
  }

  private static boolean jacksonReadsOneObject(byte[] body) {
    try {
      return MAPPER.readTree(body) instanceof ObjectNode;
    } catch (java.io.IOException e) {
      return false;
    }
  }

  private static boolean validUtf8(byte[] body) {
    try {
      StandardCharsets.UTF_8.newDecoder().decode(ByteBuffer.wrap(body));
      return true;
    } catch (CharacterCodingException e) {
      return false;
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Generators

  private Obj object(int depth, MemberPaths.Node level) {
    int count = random.nextInt(depth == 0 ? 7 : 4);
    List<Member> members = new ArrayList<>();
    for (int i = 0; i < count; i++) {
      String name =
          level != null && random.nextInt(3) == 0
              ? pick(level.children.isEmpty() || (!level.removed.isEmpty() && random.nextBoolean()) ? level.removed.keySet() : level.children.keySet())
              : pick(NAMES);
      MemberPaths.Node child = level == null ? null : level.child(name);
      Value value = child != null && random.nextInt(4) > 0 ? object(depth + 1, child) : value(depth + 1);
      members.add(new Member(spell(name), name, value));
    }
    return new Obj(members, new Ws(blank(), blank(), blank(), blank(), blank(), blank()));
  }

  private Value value(int depth) {
    int kind = depth > 4 ? 0 : random.nextInt(6);
    if (kind == 4) {
      return object(depth, null);
    }
    if (kind == 5) {
      List<Value> items = new ArrayList<>();
      for (int i = random.nextInt(4); i > 0; i--) {
        items.add(value(depth + 1));
      }
      return new Arr(items, blank());
    }
    return new Raw(pick(SCALARS));
  }

  /** The name as a client may write it: some characters as escapes, hex in either case. */
  private String spell(String name) {
    StringBuilder key = new StringBuilder("\"");
    for (char c : name.toCharArray()) {
      if (random.nextInt(8) == 0) {
        String hex = String.format("%04x", (int) c);
        key.append("\\u").append(random.nextBoolean() ? hex : hex.toUpperCase(java.util.Locale.ROOT));
      } else {
        key.append(c);
      }
    }
    return key.append('"').toString();
  }

  private String blank() {
    return pick(BLANKS);
  }

  private <T> T pick(java.util.Collection<T> from) {
    Iterator<T> it = from.iterator();
    for (int i = random.nextInt(from.size()); i > 0; i--) {
      it.next();
    }
    return it.next();
  }

  private List<Integer> randomCuts(int length) {
    TreeSet<Integer> cuts = new TreeSet<>();
    for (int i = random.nextInt(6); i >= 0; i--) {
      cuts.add(random.nextInt(length + 1));
    }
    return List.copyOf(cuts);
  }

  private static final byte[] CORRUPTIONS = "{}[],:\" \\0-.eNIx".getBytes(StandardCharsets.US_ASCII);

  /** One byte deleted, inserted, duplicated or replaced, or the body cut short. */
  private byte[] corrupt(byte[] body) {
    int at = random.nextInt(body.length + 1);
    byte b = CORRUPTIONS[random.nextInt(CORRUPTIONS.length)];
    return switch (random.nextInt(5)) {
      case 0 -> at == body.length ? body : concat(Arrays.copyOf(body, at), Arrays.copyOfRange(body, at + 1, body.length));
      case 1 -> concat(Arrays.copyOf(body, at), concat(new byte[] {b}, Arrays.copyOfRange(body, at, body.length)));
      case 2 -> at == body.length ? body : concat(Arrays.copyOf(body, at + 1), Arrays.copyOfRange(body, at, body.length));
      case 3 -> {
        byte[] copy = body.clone();
        if (at < copy.length) {
          copy[at] = b;
        }
        yield copy;
      }
      default -> Arrays.copyOf(body, at);
    };
  }

  private static byte[] concat(byte[] a, byte[] b) {
    byte[] out = Arrays.copyOf(a, a.length + b.length);
    System.arraycopy(b, 0, out, a.length, b.length);
    return out;
  }

  @Test
  void theGeneratorReachesEveryPath() {
    Map<String, Integer> seen = new java.util.TreeMap<>();
    for (int n = 0; n < 300; n++) {
      Obj doc = object(0, PATHS.root());
      JsonDoc.removedCounts(doc, PATHS.root()).forEach((path, count) -> seen.merge(path, count, Integer::sum));
    }
    assertThat(seen.keySet()).containsExactlyInAnyOrderElementsOf(PATHS.paths());
  }
}
