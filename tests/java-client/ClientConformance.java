/*
 * Drives a server's admin API through WireMock's own Java client
 * (com.github.tomakehurst.wiremock.client.WireMock, the DSL used in JUnit tests) and
 * prints a normalised transcript, one line per step. The same program runs against
 * real WireMock and against decoy; run.sh diffs the two transcripts.
 *
 *   java -cp wiremock-standalone.jar:classes ClientConformance HOST PORT ROOT_DIR FIXTURE_DIR
 *
 * ROOT_DIR is the server's --root-dir (a scratch copy of FIXTURE_DIR: saveMappings and
 * recordings write into it). Steps with an expectation print "FAIL ..." and make the
 * exit status 1 when the answer is not WireMock 3.13.2's; the other steps only record.
 * Normalised away: ports, random UUIDs (numbered by first appearance), timestamps.
 */
import static com.github.tomakehurst.wiremock.client.WireMock.*;

import com.github.tomakehurst.wiremock.client.CountMatchingStrategy;
import com.github.tomakehurst.wiremock.client.HttpAdminClient;
import com.github.tomakehurst.wiremock.client.WireMock;
import com.github.tomakehurst.wiremock.common.Json;
import com.github.tomakehurst.wiremock.common.Metadata;
import com.github.tomakehurst.wiremock.extension.Parameters;
import com.github.tomakehurst.wiremock.global.GlobalSettings;
import com.github.tomakehurst.wiremock.http.HttpHeader;
import com.github.tomakehurst.wiremock.http.LogNormal;
import com.github.tomakehurst.wiremock.http.UniformDistribution;
import com.github.tomakehurst.wiremock.admin.model.ServeEventQuery;
import com.github.tomakehurst.wiremock.recording.SnapshotRecordResult;
import com.github.tomakehurst.wiremock.stubbing.Scenario;
import com.github.tomakehurst.wiremock.stubbing.ServeEvent;
import com.github.tomakehurst.wiremock.stubbing.StubImport;
import com.github.tomakehurst.wiremock.stubbing.StubMapping;
import com.github.tomakehurst.wiremock.verification.LoggedRequest;
import com.github.tomakehurst.wiremock.verification.NearMiss;
import com.sun.net.httpserver.HttpServer;
import java.io.IOException;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;

public class ClientConformance {
  // ids this program gives its stubs (and the fixture's file stubs): kept as they are
  static final UUID FILE_HELLO = UUID.fromString("00000000-0000-0000-0000-0000000000f1");
  static final UUID FILE_JSON = UUID.fromString("00000000-0000-0000-0000-0000000000f2");
  static final UUID HELLO = id(1);
  static final UUID QUERY = id(2);
  static final UUID META_A = id(3);
  static final UUID META_B = id(4);
  static final UUID FLOW1 = id(5);
  static final UUID FLOW2 = id(6);
  static final UUID FLOW3 = id(7);
  static final UUID IMP1 = id(8);
  static final UUID IMP2 = id(9);
  static final UUID IMP3 = id(10);
  static final UUID SAVED = id(11);
  static final UUID TRANSIENT = id(12);
  static final UUID TIE_BROAD = id(13);
  static final UUID TIE_EXACT = id(14);
  static final UUID UNKNOWN = UUID.fromString("99999999-9999-9999-9999-999999999999");

  static UUID id(int n) {
    return UUID.fromString(String.format("11111111-0000-0000-0000-%012d", n));
  }

  static String host;
  static int port;
  static int upstreamPort;
  static Path root;
  static Path fixture;
  static WireMock wm;
  static HttpAdminClient admin;
  static final HttpClient http =
      HttpClient.newBuilder()
          .version(HttpClient.Version.HTTP_1_1)
          .connectTimeout(Duration.ofSeconds(5))
          .build();
  static int failures = 0;

  public static void main(String[] args) throws Exception {
    host = args[0];
    port = Integer.parseInt(args[1]);
    root = Paths.get(args[2]);
    fixture = Paths.get(args[3]);
    wm = new WireMock(host, port);
    admin = new HttpAdminClient(host, port);
    configureFor(host, port); // the static DSL (stubFor, verify, ...) talks to the same server

    HttpServer upstream = startUpstream();
    upstreamPort = upstream.getAddress().getPort();
    try {
      stubs();
      journal();
      metadataAndRemoval();
      scenarios();
      settings();
      imports();
      saveAndResets();
      recording();
      loadAndShutdown();
    } finally {
      upstream.stop(0);
    }
    if (failures > 0) {
      System.out.println("# " + failures + " expectation(s) failed");
      System.exit(1);
    }
  }

  // ---------------------------------------------------------------- stub CRUD

  static void stubs() {
    check("listAllStubMappings (files loaded)", "total=2 " + ids(FILE_HELLO, FILE_JSON),
        () -> listing(listAllStubMappings().getMappings()));
    check("getSingleStubMapping(file stub)", null, () -> json(getSingleStubMapping(FILE_HELLO)));
    check("file stub serves its body file", "200 hello from a file", () -> call("GET", "/file/hello"));
    check("stubFor returns the stub with its id", HELLO.toString(), () -> stubFor(
            get(urlEqualTo("/api/hello"))
                .withId(HELLO)
                .withName("hello")
                .willReturn(ok("hi").withHeader("X-Thing", "one")))
        .getId());
    check("the stub serves", "200 hi X-Thing=one", () -> call("GET", "/api/hello", "X-Thing"));
    check("stubFor without id gets a client-side id", "true", () -> {
      StubMapping s = stubFor(post(urlPathEqualTo("/api/post"))
          .withRequestBody(equalToJson("{\"a\": 1}"))
          .willReturn(created()));
      return s.getId() != null && listAllStubMappings().getMappings().stream()
          .anyMatch(m -> m.getId().equals(s.getId()));
    });
    check("register(StubMapping) instance", "null", () -> {
      wm.register(get(urlPathEqualTo("/api/q")).withId(QUERY).willReturn(ok("q")).build());
      return null;
    });
    check("allStubMappings (instance)", null, () -> listing(wm.allStubMappings().getMappings()));
    check("getStubMapping (instance)", null, () -> json(wm.getStubMapping(HELLO).getItem()));
    check("editStub", "null", () -> {
      editStub(get(urlEqualTo("/api/hello")).withId(HELLO).withName("hello")
          .willReturn(status(201).withBody("edited")));
      return null;
    });
    check("the edited stub serves", "201 edited", () -> call("GET", "/api/hello"));
    check("getStubMapping(edited)", null, () -> json(wm.getStubMapping(HELLO).getItem()));
    check("getSingleStubMapping(unknown id)", null, () -> json(getSingleStubMapping(UNKNOWN)));
    check("editStub(unknown id)", null, () -> {
      editStub(get(urlEqualTo("/nope")).withId(UNKNOWN).willReturn(ok()));
      return null;
    });
    // One self-contained step (it removes its stub whatever happens), so that how an
    // unknown transformer is loaded shows up here and nowhere else.
    check("stubFor with an unknown transformer, then removeStub", "200 404", () -> {
      try {
        stubFor(get(urlEqualTo("/bad")).withId(UNKNOWN)
            .willReturn(ok().withTransformers("no-such-transformer")));
        String served = code(call("GET", "/bad"));
        removeStub(UNKNOWN);
        return served + " " + code(call("GET", "/bad"));
      } finally {
        try {
          removeStub(UNKNOWN);
        } catch (RuntimeException ignored) {
          // already gone, or never created
        }
      }
    });
  }

  // ---------------------------------------------------------------- journal

  static void journal() {
    check("resetAllRequests before the traffic", "0", () -> {
      resetAllRequests();
      return getAllServeEvents().size();
    });
    check("traffic", "201 201 404 200 201 404 404", () -> String.join(" ",
        code(call("GET", "/api/hello", null, "X-Custom-Header", "Value1")),
        code(call("GET", "/api/hello", null, "X-Custom-Header", "Value2")),
        code(call("GET", "/api/hellp")),
        code(call("GET", "/api/q?a=1&a=2&b=x")),
        code(callBody("POST", "/api/post", "{\"a\": 1}", "application/json")),
        code(callBody("POST", "/api/form", "k=v&k=w", "application/x-www-form-urlencoded")),
        code(call("GET", "/file/json?v=2"))));
    check("verify(getRequestedFor)", "null", () -> {
      verify(getRequestedFor(urlEqualTo("/api/hello")));
      return null;
    });
    check("verify(1, withHeader)", "null", () -> {
      verify(1, getRequestedFor(urlEqualTo("/api/hello"))
          .withHeader("X-Custom-Header", equalTo("Value1")));
      return null;
    });
    check("verify(2, ...) fails", null, () -> {
      verify(2, getRequestedFor(urlEqualTo("/api/hello")));
      return null;
    });
    check("verify(moreThan(3), ...) fails", null, () -> {
      verify(moreThan(3), postRequestedFor(urlPathEqualTo("/api/post")));
      return null;
    });
    check("verify(never made) fails with a near-miss diff", null, () -> {
      verify(getRequestedFor(urlEqualTo("/api/helo")));
      return null;
    });
    check("verifyThat(lessThan(1), never made)", "null", () -> {
      wm.verifyThat(lessThan(1), getRequestedFor(urlEqualTo("/nowhere")));
      return null;
    });
    check("verifyThat(exactly(1), withRequestBody)", "null", () -> {
      wm.verifyThat(exactly(1), postRequestedFor(urlPathEqualTo("/api/post"))
          .withRequestBody(matchingJsonPath("$.a", equalTo("1"))));
      return null;
    });
    check("countRequestsMatching (Admin)", "6", () -> admin.countRequestsMatching(
        anyRequestedFor(urlPathMatching("/api/.*")).build()).getCount());
    check("find: header as sent", "1 X-Custom-Header=Value1", () -> {
      List<LoggedRequest> found = wm.find(getRequestedFor(urlEqualTo("/api/hello"))
          .withHeader("X-Custom-Header", equalTo("Value1")));
      return found.size() + " X-Custom-Header=" + found.get(0).getHeader("X-Custom-Header");
    });
    check("find: header in another case", "x-custom-header=Value1 contains=true", () -> {
      LoggedRequest r = wm.find(getRequestedFor(urlEqualTo("/api/hello"))
          .withHeader("X-Custom-Header", equalTo("Value1"))).get(0);
      return "x-custom-header=" + r.getHeader("x-custom-header")
          + " contains=" + r.containsHeader("X-CUSTOM-HEADER");
    });
    check("find: oldest first", "[Value1, Value2]", () -> wm.find(
            getRequestedFor(urlEqualTo("/api/hello"))).stream()
        .map(r -> r.header("x-custom-header").firstValue()).collect(Collectors.toList()).toString());
    check("find: header keys as sent", "[Content-Length, Host, User-Agent, X-Custom-Header]", () -> {
      LoggedRequest r = wm.find(getRequestedFor(urlEqualTo("/api/hello"))).get(0);
      return new TreeSet<>(r.getAllHeaderKeys()).toString();
    });
    check("find: request fields", null, () -> {
      LoggedRequest r = wm.find(getRequestedFor(urlEqualTo("/api/hello"))).get(0);
      return "url=" + r.getUrl() + " absoluteUrl=" + r.getAbsoluteUrl() + " method="
          + r.getMethod() + " scheme=" + r.getScheme() + " host=" + r.getHost() + " port="
          + r.getPort() + " clientIp=" + r.getClientIp() + " body=[" + r.getBodyAsString()
          + "] browserProxy=" + r.isBrowserProxyRequest() + " protocol=" + r.getProtocol()
          + " loggedDate=" + (r.getLoggedDate() != null) + " id=" + (r.getId() != null);
    });
    check("findAll: query parameters", "1 a=[1, 2] b=[x]", () -> {
      List<LoggedRequest> found = findAll(getRequestedFor(urlPathEqualTo("/api/q"))
          .withQueryParam("a", havingExactly("1", "2")));
      LoggedRequest r = found.get(0);
      return found.size() + " a=" + r.queryParameter("a").values() + " b="
          + r.queryParameter("b").values();
    });
    check("findAll: JSON body", "1 body={\"a\": 1} Content-Type=application/json", () -> {
      List<LoggedRequest> found = findAll(postRequestedFor(urlPathEqualTo("/api/post"))
          .withRequestBody(equalToJson("{\"a\":1}")));
      return found.size() + " body=" + found.get(0).getBodyAsString() + " Content-Type="
          + found.get(0).getHeader("Content-Type");
    });
    check("findAll: form parameters", null, () -> {
      List<LoggedRequest> found = findAll(postRequestedFor(urlEqualTo("/api/form")));
      LoggedRequest r = found.get(0);
      Map<String, List<String>> form = new LinkedHashMap<>();
      r.formParameters().forEach((k, v) -> form.put(k, v.values()));
      return found.size() + " formParameters=" + form + " withFormParam="
          + findAll(postRequestedFor(urlEqualTo("/api/form"))
              .withFormParam("k", havingExactly("v", "w"))).size();
    });
    check("getAllServeEvents", null, () -> events(getAllServeEvents()));
    check("getServeEvents(ALL_UNMATCHED)", "[GET /file/json?v=2 404 unmatched stub=<uuid-*>, POST /api/form 404 unmatched stub=<uuid-*>,"
            + " GET /api/hellp 404 unmatched stub=<uuid-*>]",
        () -> events(wm.getServeEvents(ServeEventQuery.ALL_UNMATCHED)));
    check("getServeEvents(forStubMapping)",
        "[GET /api/hello 201 matched stub=" + HELLO + ", GET /api/hello 201 matched stub=" + HELLO + "]",
        () -> events(getAllServeEvents(ServeEventQuery.forStubMapping(HELLO))));
    check("getServedStub (Admin)", null, () -> {
      UUID first = getAllServeEvents().get(0).getId();
      ServeEvent e = admin.getServedStub(first).getItem();
      return events(List.of(e)) + " sameId=" + e.getId().equals(first);
    });
    check("getServedStub (Admin, unknown id)", null,
        () -> events(List.of(admin.getServedStub(UNKNOWN).getItem())));
    check("findUnmatchedRequests", "[/file/json?v=2, /api/form, /api/hellp]",
        () -> urls(findUnmatchedRequests()));
    check("findNearMissesForAllUnmatched", null, () -> nearMisses(findNearMissesForAllUnmatched()));
    check("findNearMissesFor(LoggedRequest)", null, () -> {
      LoggedRequest hellp = findUnmatchedRequests().stream()
          .filter(r -> r.getUrl().equals("/api/hellp")).findFirst().get();
      return nearMisses(findNearMissesFor(hellp));
    });
    check("findNearMissesFor(RequestPatternBuilder)", null,
        () -> nearMisses(findNearMissesFor(getRequestedFor(urlEqualTo("/api/helo")))));
    check("findAllNearMissesFor (instance)", null,
        () -> nearMisses(wm.findAllNearMissesFor(postRequestedFor(urlEqualTo("/api/pos")))));
    check("findUnmatchedStubs (Admin)", null,
        () -> listing(admin.findUnmatchedStubs().getMappings()));
    // Two stubs of one priority both match: the serve event of a tie must still be
    // read by the client (decoy names the other stub in a sub-event). The step
    // removes its stubs and events, so the steps after it see the journal as it was.
    check("serve events after a tie of two stubs (getAllServeEvents, getServedStub)",
        "[GET /tie/x 200 matched stub=" + TIE_EXACT + "] [GET /tie/x 200 matched stub="
            + TIE_EXACT + "] removed=1", () -> {
          try {
            stubFor(get(urlPathMatching("/tie/.*")).withId(TIE_BROAD).willReturn(ok("broad")));
            stubFor(get(urlPathEqualTo("/tie/x")).withId(TIE_EXACT).willReturn(ok("exact")));
            call("GET", "/tie/x");
            List<ServeEvent> ties = getAllServeEvents(ServeEventQuery.forStubMapping(TIE_EXACT));
            ServeEvent one = admin.getServedStub(ties.get(0).getId()).getItem();
            return events(ties) + " " + events(List.of(one)) + " removed="
                + removeServeEvents(getRequestedFor(urlPathMatching("/tie/.*"))).size();
          } finally {
            removeStub(TIE_BROAD);
            removeStub(TIE_EXACT);
          }
        });
  }

  // ------------------------------------------------- metadata, removing events and stubs

  static void metadataAndRemoval() {
    check("stubFor with metadata", "null", () -> {
      stubFor(get(urlEqualTo("/meta/a")).withId(META_A)
          .withMetadata(Metadata.metadata().attr("team", "alpha")).willReturn(ok("a")));
      stubFor(get(urlEqualTo("/meta/b")).withId(META_B)
          .withMetadata(Metadata.metadata().attr("team", "beta")
              .attr("tags", Metadata.metadata().attr("slow", true)))
          .willReturn(ok("b")));
      return null;
    });
    check("findStubsByMetadata(team alpha)", ids(META_A),
        () -> ids(findStubsByMetadata(matchingJsonPath("$.team", equalTo("alpha")))));
    check("findStubsByMetadata(origin, a file stub)", ids(FILE_HELLO),
        () -> ids(findStubsByMetadata(matchingJsonPath("$.origin"))));
    check("findAllStubsByMetadata (instance, nested)", ids(META_B),
        () -> ids(wm.findAllStubsByMetadata(matchingJsonPath("$.tags.slow"))));
    check("traffic to metadata stubs", "200 200 200",
        () -> String.join(" ", code(call("GET", "/meta/a")), code(call("GET", "/meta/b")),
            code(call("GET", "/meta/a"))));
    check("removeEventsByStubMetadata(team alpha)", "[GET /meta/a 200 matched stub=" + META_A + ", GET /meta/a 200 matched stub=" + META_A + "]",
        () -> events(removeEventsByStubMetadata(matchingJsonPath("$.team", equalTo("alpha")))));
    check("journal after removeEventsByStubMetadata", "[/meta/b]",
        () -> urls(findAll(getRequestedFor(urlPathMatching("/meta/.*")))));
    check("removeServeEvents(pattern)", "[GET /meta/b 200 matched stub=" + META_B + "]",
        () -> events(removeServeEvents(getRequestedFor(urlPathMatching("/meta/.*")))));
    check("removeEventsByMetadata (instance, nothing left)", "[]",
        () -> events(wm.removeEventsByMetadata(matchingJsonPath("$.team"))));
    check("removeEvents (instance)", "[POST /api/form 404 unmatched stub=<uuid-*>]",
        () -> events(wm.removeEvents(postRequestedFor(urlEqualTo("/api/form")))));
    check("removeServeEvent(id)", "[/file/json?v=2]", () -> {
      UUID hellp = getAllServeEvents(ServeEventQuery.ALL_UNMATCHED).stream()
          .filter(e -> e.getRequest().getUrl().equals("/api/hellp")).findFirst().get().getId();
      removeServeEvent(hellp);
      return urls(findUnmatchedRequests());
    });
    check("removeServeEvent(unknown id)", null, () -> {
      wm.removeEvent(UNKNOWN);
      return null;
    });
    check("removeStubsByMetadata(team beta)", "404", () -> {
      removeStubsByMetadata(matchingJsonPath("$.team", equalTo("beta")));
      return code(call("GET", "/meta/b"));
    });
    check("removeStubsByMetadataPattern (instance, no match)", "null", () -> {
      wm.removeStubsByMetadataPattern(matchingJsonPath("$.team", equalTo("gamma")));
      return null;
    });
    check("removeStub(StubMapping)", "404", () -> {
      StubMapping a = getSingleStubMapping(META_A);
      removeStub(a);
      return code(call("GET", "/meta/a"));
    });
    check("removeStubMapping(MappingBuilder, same id)", "404", () -> {
      wm.removeStubMapping(get(urlPathEqualTo("/api/q")).withId(QUERY).willReturn(ok("q")));
      return code(call("GET", "/api/q"));
    });
    check("removeStub(MappingBuilder, other id, same request)", null, () -> {
      stubFor(get(urlEqualTo("/api/same")).withId(META_A).willReturn(ok("same")));
      removeStub(get(urlEqualTo("/api/same")).willReturn(ok("same")));
      return code(call("GET", "/api/same"));
    });
    check("removeStub(UUID)", "404", () -> {
      removeStub(HELLO);
      return code(call("GET", "/api/hello"));
    });
    check("removeStubMapping(unknown UUID)", null, () -> {
      wm.removeStubMapping(UNKNOWN);
      return null;
    });
    check("listAllStubMappings after removals", null,
        () -> listing(listAllStubMappings().getMappings()));
  }

  // ---------------------------------------------------------------- scenarios

  static void scenarios() {
    check("scenario stubs", "null", () -> {
      stubFor(get(urlEqualTo("/flow")).withId(FLOW1).inScenario("flow")
          .whenScenarioStateIs(Scenario.STARTED).willSetStateTo("second").willReturn(ok("one")));
      stubFor(get(urlEqualTo("/flow")).withId(FLOW2).inScenario("flow")
          .whenScenarioStateIs("second").willSetStateTo("third").willReturn(ok("two")));
      stubFor(get(urlEqualTo("/flow")).withId(FLOW3).inScenario("flow")
          .whenScenarioStateIs("third").willReturn(ok("three")));
      return null;
    });
    check("getAllScenarios", "[flow id=flow state=Started possible=[Started, second, third]]",
        () -> scenarioList(getAllScenarios()));
    check("scenario advances", "one two three three", () -> String.join(" ",
        body(call("GET", "/flow")), body(call("GET", "/flow")), body(call("GET", "/flow")),
        body(call("GET", "/flow"))));
    check("getScenarios (instance)", "[flow id=flow state=third possible=[Started, second, third]]",
        () -> scenarioList(wm.getScenarios()));
    check("setScenarioState(flow, second)", "two", () -> {
      setScenarioState("flow", "second");
      return body(call("GET", "/flow"));
    });
    check("resetScenario(flow)", "Started one", () -> {
      resetScenario("flow");
      String state = getAllScenarios().get(0).getState();
      return state + " " + body(call("GET", "/flow"));
    });
    check("setSingleScenarioState (instance)", "third", () -> {
      wm.setSingleScenarioState("flow", "third");
      return getAllScenarios().get(0).getState();
    });
    check("resetScenarioState (instance)", "Started", () -> {
      wm.resetScenarioState("flow");
      return getAllScenarios().get(0).getState();
    });
    check("setScenarioState(flow, no such state)",
        "threw com.github.tomakehurst.wiremock.common.ClientError: *does not support state nosuchstate*", () -> {
      setScenarioState("flow", "nosuchstate");
      return getAllScenarios().get(0).getState();
    });
    check("setScenarioState(no such scenario)", null, () -> {
      setScenarioState("nosuchscenario", "x");
      return null;
    });
    check("resetScenario(no such scenario)", null, () -> {
      resetScenario("nosuchscenario");
      return null;
    });
    check("resetAllScenarios", "Started", () -> {
      call("GET", "/flow");
      resetAllScenarios();
      return getAllScenarios().get(0).getState();
    });
    check("resetScenarios (instance)", "Started", () -> {
      call("GET", "/flow");
      wm.resetScenarios();
      return getAllScenarios().get(0).getState();
    });
  }

  // ---------------------------------------------------------------- global settings

  static void settings() {
    check("getSettings (defaults)",
        "fixedDelay=null delayDistribution=null extended=null proxyPassThrough=true", () -> settingsText(getSettings()));
    check("updateSettings(fixedDelay, extended)", null, () -> {
      updateSettings(GlobalSettings.builder().fixedDelay(7)
          .extended(Parameters.one("mine", "x")).build());
      return settingsText(wm.getGlobalSettings());
    });
    check("setGlobalFixedDelay", null, () -> {
      setGlobalFixedDelay(3);
      return settingsText(getSettings());
    });
    check("setGlobalRandomDelay(uniform)", null, () -> {
      setGlobalRandomDelay(new UniformDistribution(1, 3));
      return settingsText(getSettings());
    });
    check("setGlobalRandomDelayVariable(lognormal, instance)", null, () -> {
      wm.setGlobalRandomDelayVariable(new LogNormal(2, 0.1));
      return settingsText(getSettings());
    });
    check("updateGlobalSettings(defaults)", null, () -> {
      wm.updateGlobalSettings(GlobalSettings.defaults());
      return settingsText(getSettings());
    });
  }

  // ---------------------------------------------------------------- import

  static void imports() {
    check("importStubs", "one two", () -> {
      importStubs(StubImport.stubImport()
          .stub(get(urlEqualTo("/imp/1")).withId(IMP1).willReturn(ok("one")))
          .stub(get(urlEqualTo("/imp/2")).withId(IMP2).willReturn(ok("two"))));
      return body(call("GET", "/imp/1")) + " " + body(call("GET", "/imp/2"));
    });
    check("importStubs ignoreExisting", "one", () -> {
      importStubs(StubImport.stubImport()
          .stub(get(urlEqualTo("/imp/1")).withId(IMP1).willReturn(ok("uno")))
          .ignoreExisting());
      return body(call("GET", "/imp/1"));
    });
    check("importStubMappings overwriteExisting (instance)", "uno", () -> {
      wm.importStubMappings(StubImport.stubImport()
          .stub(get(urlEqualTo("/imp/1")).withId(IMP1).willReturn(ok("uno")))
          .overwriteExisting());
      return body(call("GET", "/imp/1"));
    });
    check("importStubs deleteAllExistingStubsNotInImport", "total=1 " + ids(IMP3), () -> {
      importStubs(StubImport.stubImport()
          .stub(get(urlEqualTo("/imp/3")).withId(IMP3).willReturn(ok("three")))
          .deleteAllExistingStubsNotInImport());
      return listing(listAllStubMappings().getMappings());
    });
  }

  // ------------------------------------------------- saveMappings and the resets

  static void saveAndResets() {
    check("saveMappings writes API stubs", null, () -> {
      stubFor(get(urlEqualTo("/saved")).withId(SAVED).withName("saved stub").willReturn(ok("kept")));
      saveAllMappings();
      return mappingFiles() + " persistent=" + getSingleStubMapping(SAVED).isPersistent();
    });
    check("wm.saveMappings (instance) again", null, () -> {
      wm.saveMappings();
      return mappingFiles();
    });
    check("resetToDefaultMappings drops unsaved API stubs and reloads files",
        "total=4 " + ids(FILE_HELLO, FILE_JSON, IMP3, SAVED) + " /transient=404 journal=0", () -> {
          stubFor(get(urlEqualTo("/transient")).withId(TRANSIENT).willReturn(ok("gone")));
          call("GET", "/transient");
          wm.resetToDefaultMappings();
          int journal = getAllServeEvents().size();
          return listing(listAllStubMappings().getMappings()) + " /transient="
              + code(call("GET", "/transient")) + " journal=" + journal;
        });
    check("resetToDefault (static)", "total=4 " + ids(FILE_HELLO, FILE_JSON, IMP3, SAVED), () -> {
      stubFor(get(urlEqualTo("/transient")).withId(TRANSIENT).willReturn(ok("gone")));
      resetToDefault();
      return listing(listAllStubMappings().getMappings());
    });
    check("resetMappings (instance, POST /reset)",
        "total=4 " + ids(FILE_HELLO, FILE_JSON, IMP3, SAVED) + " journal=0 flow=404", () -> {
          stubFor(get(urlEqualTo("/transient")).withId(TRANSIENT).willReturn(ok("gone")));
          call("GET", "/transient");
          wm.resetMappings();
          int journal = getAllServeEvents().size();
          return listing(listAllStubMappings().getMappings()) + " journal=" + journal
              + " flow=" + code(call("GET", "/flow"));
        });
    check("reset (static)", "total=4 " + ids(FILE_HELLO, FILE_JSON, IMP3, SAVED), () -> {
      stubFor(get(urlEqualTo("/transient")).withId(TRANSIENT).willReturn(ok("gone")));
      reset();
      return listing(listAllStubMappings().getMappings());
    });
    check("resetAll (Admin)", "total=4 journal=0", () -> {
      stubFor(get(urlEqualTo("/transient")).withId(TRANSIENT).willReturn(ok("gone")));
      call("GET", "/transient");
      admin.resetAll();
      return "total=" + listAllStubMappings().getMappings().size() + " journal="
          + getAllServeEvents().size();
    });
    check("removeStub(saved stub) deletes its file", null, () -> {
      removeStub(SAVED);
      return mappingFiles();
    });
    check("removeMappings (instance, DELETE /mappings)", "total=0 [] /file/hello=404", () -> {
      wm.removeMappings();
      return listing(listAllStubMappings().getMappings()) + " /file/hello="
          + code(call("GET", "/file/hello"));
    });
    check("removeAllMappings (static): files left on disk", null, () -> {
      resetToDefault();
      removeAllMappings();
      return listing(listAllStubMappings().getMappings()) + " " + mappingFiles();
    });
    check("resetRequests (instance)", "0", () -> {
      call("GET", "/x");
      wm.resetRequests();
      return getAllServeEvents().size();
    });
    check("resetAllRequests (static)", "0", () -> {
      call("GET", "/x");
      resetAllRequests();
      return getAllServeEvents().size();
    });
  }

  // ---------------------------------------------------------------- recording

  static void recording() {
    String target = "http://127.0.0.1:" + upstreamPort;
    check("getRecordingStatus (before)", "NeverStarted", () -> getRecordingStatus().getStatus());
    check("startRecording(spec)", "Recording", () -> {
      startRecording(recordSpec().forTarget(target).captureHeader("Accept")
          .makeStubsPersistent(false));
      return getRecordingStatus().getStatus();
    });
    check("traffic through the recorder", "200 {\"recorded\": \"/rec/item?id=7\"} X-Up=yes",
        () -> call("GET", "/rec/item?id=7", "X-Up", "Accept", "application/json"));
    check("stopRecording", null, () -> recorded(stopRecording().getStubMappings()));
    check("getStubRecordingStatus (instance, after)", "Stopped",
        () -> wm.getStubRecordingStatus().getStatus());
    check("the recording answers", "200 {\"recorded\": \"/rec/item?id=7\"}",
        () -> call("GET", "/rec/item?id=7", null, "Accept", "application/json"));
    check("stopRecording when not recording",
        "threw com.github.tomakehurst.wiremock.recording.NotRecordingException: *Not currently recording.*", () -> recorded(stopRecording().getStubMappings()));
    check("startStubRecording(url) + stop (persisted)", null, () -> {
      wm.startStubRecording(target);
      call("GET", "/rec/other");
      SnapshotRecordResult r = wm.stopStubRecording();
      return recorded(r.getStubMappings()) + " files=" + mappingFiles();
    });
    check("startRecording twice", null, () -> {
      startRecording(target);
      try {
        startRecording(target);
        return getRecordingStatus().getStatus();
      } finally {
        stopRecording();
      }
    });
    check("startStubRecording() without a target", null, () -> {
      try {
        wm.startStubRecording();
        return getRecordingStatus().getStatus();
      } finally {
        try {
          stopRecording();
        } catch (RuntimeException ignored) {
        }
      }
    });
    check("snapshotRecord()", null, () -> recorded(snapshotRecord()));
    check("takeSnapshotRecording(spec) (instance)", null, () -> recorded(wm.takeSnapshotRecording(
        recordSpec().onlyRequestsMatching(getRequestedFor(urlPathEqualTo("/rec/item")))
            .makeStubsPersistent(false).ignoreRepeatRequests())));
    check("takeSnapshotRecording() (instance, journal has only played-back entries)", null,
        () -> {
          resetAllRequests();
          call("GET", "/rec/item?id=7", null, "Accept", "application/json");
          return recorded(wm.takeSnapshotRecording());
        });
  }

  // ------------------------------------------------- loadMappingsFrom and shutdown

  static void loadAndShutdown() {
    check("loadMappingsFrom(fixture root)", "total=2 " + ids(FILE_HELLO, FILE_JSON)
        + " 200 hello from a file", () -> {
          removeAllMappings();
          wm.loadMappingsFrom(fixture.toFile());
          return listing(listAllStubMappings().getMappings()) + " "
              + call("GET", "/file/hello");
        });
    check("stubFor with an existing id (WireMock: 422 Duplicate stub mapping ID)",
        "threw com.github.tomakehurst.wiremock.common.ClientError: *Duplicate stub mapping ID*", () -> {
      stubFor(get(urlEqualTo("/file/hello")).withId(FILE_HELLO).willReturn(ok("replaced")));
      return "total=" + listAllStubMappings().getMappings().size() + " "
          + call("GET", "/file/hello");
    });
    check("shutdownServer", "stopped", () -> {
      shutdownServer();
      long deadline = System.currentTimeMillis() + 15000;
      while (System.currentTimeMillis() < deadline) {
        try {
          call("GET", "/__admin/health");
        } catch (Exception e) {
          return "stopped";
        }
        Thread.sleep(100);
      }
      return "still answering";
    });
  }

  // ---------------------------------------------------------------- helpers

  interface Step {
    Object run() throws Exception;
  }

  /** Runs one step, prints "name: result", checks it when expected is not null. */
  static void check(String name, String expected, Step step) {
    String result;
    try {
      Object r = step.run();
      result = String.valueOf(r);
    } catch (Throwable t) {
      result = "threw " + t.getClass().getName() + ": " + t.getMessage();
    }
    result = normalise(result);
    System.out.println(name + ": " + result);
    if (expected != null && !matches(normalise(expected), result)) {
      failures++;
      System.out.println("  FAIL expected: " + normalise(expected));
    }
    System.out.flush();
  }

  /** Equal, or "*" in expected stands for any text. */
  static boolean matches(String expected, String result) {
    String regex = Stream.of(expected.split("\\*", -1)).map(Pattern::quote)
        .collect(Collectors.joining(".*"));
    return result.matches(regex);
  }

  static final Pattern UUID_RE =
      Pattern.compile("[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
  static final Map<String, String> randomIds = new HashMap<>();

  static String normalise(String s) {
    if (s == null) {
      return "null";
    }
    s = s.replace("\r", "").replace("\n", "\\n");
    s = s.replace(root.toAbsolutePath().toString(), "<root>");
    s = s.replace("127.0.0.1:" + port, "<server>").replace("localhost:" + port, "<server>");
    s = s.replace("127.0.0.1:" + upstreamPort, "<upstream>")
        .replace("localhost:" + upstreamPort, "<upstream>");
    s = s.replaceAll("\\b" + port + "\\b", "<server-port>");
    s = s.replaceAll("\\b" + upstreamPort + "\\b", "<upstream-port>");
    s = s.replaceAll("\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(\\.\\d+)?Z?", "<time>");
    s = s.replaceAll("[A-Z][a-z]{2}, \\d{2} [A-Z][a-z]{2} \\d{4} \\d{2}:\\d{2}:\\d{2} GMT", "<date>");
    Matcher m = UUID_RE.matcher(s);
    StringBuilder out = new StringBuilder();
    while (m.find()) {
      String u = m.group().toLowerCase();
      String label = u.startsWith("11111111-0000-") || u.startsWith("00000000-0000-")
          || u.startsWith("99999999-") ? u
          : randomIds.computeIfAbsent(u, k -> "<uuid-" + (randomIds.size() + 1) + ">");
      m.appendReplacement(out, Matcher.quoteReplacement(label));
    }
    m.appendTail(out);
    return out.toString();
  }

  static String json(Object o) {
    return Json.write(o).replaceAll("\\n\\s*", " ");
  }

  static String ids(UUID... ids) {
    return Stream.of(ids).map(UUID::toString).sorted().collect(Collectors.toList()).toString();
  }

  static String ids(List<StubMapping> stubs) {
    // The test's own ids (eight equal digits first) sorted, then random ones: sorting
    // random UUIDs in among them would make the order differ from run to run.
    return stubs.stream().map(s -> String.valueOf(s.getId()))
        .sorted(java.util.Comparator.comparing((String id) -> id.matches("^([0-9a-f])\\1{7}-.*") ? 0 : 1)
            .thenComparing(java.util.Comparator.naturalOrder()))
        .collect(Collectors.toList()).toString();
  }

  /** Stub ids sorted (file load order is the file system's), with the total. */
  static String listing(List<StubMapping> stubs) {
    return "total=" + stubs.size() + " " + ids(stubs);
  }

  static String events(List<ServeEvent> events) {
    return events.stream().map(e -> e.getRequest().getMethod() + " " + e.getRequest().getUrl()
        + " " + (e.getResponse() == null ? "-" : e.getResponse().getStatus()) + " "
        + (e.getWasMatched() ? "matched" : "unmatched") + " stub="
        + (e.getStubMapping() == null ? "null" : String.valueOf(e.getStubMapping().getId())))
        .collect(Collectors.toList()).toString();
  }

  static String urls(List<LoggedRequest> requests) {
    return requests.stream().map(LoggedRequest::getUrl).collect(Collectors.toList()).toString();
  }

  /** Which request or stub each near miss names; the distances are each server's own. */
  static String nearMisses(List<NearMiss> misses) {
    return misses.size() + " " + misses.stream().map(n -> {
      String req = n.getRequest() == null ? "-" : n.getRequest().getMethod() + " " + n.getRequest().getUrl();
      String stub = n.getStubMapping() == null ? "-" : String.valueOf(n.getStubMapping().getId());
      String pattern = n.getRequestPattern() == null ? "-" : String.valueOf(n.getRequestPattern().getUrl());
      return req + " ~ stub " + stub + " pattern " + pattern;
    }).collect(Collectors.toList());
  }

  static String scenarioList(List<Scenario> scenarios) {
    return scenarios.stream().map(s -> s.getName() + " id=" + s.getId() + " state=" + s.getState()
        + " possible=" + new TreeSet<>(s.getPossibleStates()))
        .sorted().collect(Collectors.toList()).toString();
  }

  static String settingsText(GlobalSettings g) {
    return "fixedDelay=" + g.getFixedDelay() + " delayDistribution="
        + (g.getDelayDistribution() == null ? "null" : json(g.getDelayDistribution()))
        + " extended=" + json(g.getExtended()) + " proxyPassThrough=" + g.getProxyPassThrough();
  }

  /** Recorded stubs: request pattern, status, body and headers but Date, by URL. */
  static String recorded(List<StubMapping> stubs) {
    return stubs.size() + " " + stubs.stream().map(s -> {
      StringBuilder b = new StringBuilder();
      b.append(json(s.getRequest())).append(" -> ").append(s.getResponse().getStatus())
          .append(" ").append(s.getResponse().getBody());
      if (s.getResponse().getBodyFileName() != null) {
        b.append(" bodyFileName");
      }
      if (s.getResponse().getHeaders() != null) {
        List<String> headers = new ArrayList<>();
        for (HttpHeader h : s.getResponse().getHeaders().all()) {
          if (!h.key().equalsIgnoreCase("Date")) {
            headers.add(h.key() + "=" + h.values());
          }
        }
        headers.sort(null);
        b.append(" headers=").append(headers);
      }
      b.append(" persistent=").append(s.isPersistent());
      b.append(" scenario=").append(s.getScenarioName());
      return b.toString();
    }).sorted().collect(Collectors.toList());
  }

  /** The files below ROOT/mappings, sorted. */
  static String mappingFiles() throws IOException {
    try (Stream<Path> files = Files.walk(root.resolve("mappings"))) {
      return files.filter(Files::isRegularFile)
          .map(p -> root.resolve("mappings").relativize(p).toString())
          .sorted().collect(Collectors.toList()).toString();
    }
  }

  /** A plain HTTP call to the stub port: "STATUS BODY[ HEADER=VALUE]". */
  static String call(String method, String path) throws Exception {
    return call(method, path, null);
  }

  static String call(String method, String path, String showHeader, String... headers)
      throws Exception {
    HttpRequest.Builder b = HttpRequest.newBuilder(URI.create("http://" + host + ":" + port + path))
        .timeout(Duration.ofSeconds(20))
        .method(method, HttpRequest.BodyPublishers.noBody());
    for (int i = 0; i < headers.length; i += 2) {
      b.header(headers[i], headers[i + 1]);
    }
    return answer(http.send(b.build(), HttpResponse.BodyHandlers.ofString()), showHeader);
  }

  static String callBody(String method, String path, String body, String contentType)
      throws Exception {
    HttpRequest r = HttpRequest.newBuilder(URI.create("http://" + host + ":" + port + path))
        .timeout(Duration.ofSeconds(20))
        .header("Content-Type", contentType)
        .method(method, HttpRequest.BodyPublishers.ofString(body))
        .build();
    return answer(http.send(r, HttpResponse.BodyHandlers.ofString()), null);
  }

  static String answer(HttpResponse<String> r, String showHeader) {
    // a 404 is WireMock's "Request was not matched" report: only its status is compared
    String s = r.statusCode() == 404 ? "404" : r.statusCode() + " " + r.body();
    if (showHeader != null) {
      s += " " + showHeader + "=" + r.headers().firstValue(showHeader).orElse("null");
    }
    return s;
  }

  static String code(String answer) {
    return answer.split(" ", 2)[0];
  }

  static String body(String answer) {
    String[] parts = answer.split(" ", 2);
    return parts.length > 1 ? parts[1] : "";
  }

  /** The "real service" recordings are made from: echoes the path, sets X-Up. */
  static HttpServer startUpstream() throws IOException {
    HttpServer server = HttpServer.create(new InetSocketAddress("127.0.0.1", 0), 0);
    server.createContext("/", exchange -> {
      byte[] body = ("{\"recorded\": \"" + exchange.getRequestURI() + "\"}")
          .getBytes(StandardCharsets.UTF_8);
      exchange.getResponseHeaders().add("Content-Type", "application/json");
      exchange.getResponseHeaders().add("X-Up", "yes");
      exchange.sendResponseHeaders(200, body.length);
      try (OutputStream out = exchange.getResponseBody()) {
        out.write(body);
      }
    });
    server.start();
    return server;
  }
}
