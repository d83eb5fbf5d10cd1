-- wrk script: GET the paths listed in the file named by PATHS_FILE, one "<API key> <path>" a line,
-- in turn, each with its own key as a bearer token: a load spread over many stores (every request
-- another store's key and page), each thread starting at its own offset.
local lines = {}
for line in io.lines(os.getenv("PATHS_FILE")) do
  local token, path = line:match("^(%S+)%s+(%S+)$")
  if token then lines[#lines + 1] = { token = token, path = path } end
end
local counter = 0
local offset = 0
local thread_count = 0
function setup(thread) thread:set("offset", thread_count * 7919); thread_count = thread_count + 1 end
function request()
  counter = counter + 1
  local entry = lines[((offset + counter) % #lines) + 1]
  return wrk.format("GET", entry.path, { ["Authorization"] = "Bearer " .. entry.token })
end
